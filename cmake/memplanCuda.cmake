# memplan::cuda: the training engine's CUDA backend (cuBLAS, cuDNN and a few
# own kernels), opt-in like the solver backends. The public headers under
# memplan/engine/cuda/ are pure C++ declarations; the code that needs CUDA
# headers or nvcc is one small static library, memplan_cuda_kernels (one .cu
# translation unit for the kernels, C++ ones for the host code: one per layer
# family, the device and dispatch, the profiler), so CI compiles it once.
# memplan/memplan.hpp never includes any of it.
#
# MEMPLAN_ENABLE_CUDA defaults to ON when a CUDA compiler is found (top level). Targets
# sm_90 (H100/H200) with PTX for compute_90 embedded, unless the user set
# CMAKE_CUDA_ARCHITECTURES. Also adds tests/cuda (when tests are on), the CUDA
# examples and the CUDA benchmarks.
# As a subproject (add_subdirectory) memplan looks for CUDA only when asked,
# so consumers do not pay for nvcc detection and the kernel library.
set(_memplan_cuda_default OFF)
if(PROJECT_IS_TOP_LEVEL OR MEMPLAN_ENABLE_CUDA)
  include(CheckLanguage)
  check_language(CUDA)
  if(CMAKE_CUDA_COMPILER AND PROJECT_IS_TOP_LEVEL)
    set(_memplan_cuda_default ON)
  endif()
endif()
option(MEMPLAN_ENABLE_CUDA "Build memplan::cuda, the CUDA backend of the training engine" ${_memplan_cuda_default})
unset(_memplan_cuda_default)

set(MEMPLAN_HAS_CUDA OFF)
if(MEMPLAN_ENABLE_CUDA)
  if(NOT CMAKE_CUDA_COMPILER)
    message(FATAL_ERROR "MEMPLAN_ENABLE_CUDA is ON but no CUDA compiler was found (set CMAKE_CUDA_COMPILER)")
  endif()
  if(NOT DEFINED CMAKE_CUDA_ARCHITECTURES)
    set(CMAKE_CUDA_ARCHITECTURES 90-real 90-virtual) # sm_90 code + compute_90 PTX
  endif()
  enable_language(CUDA)
  find_package(CUDAToolkit REQUIRED)
  find_path(CUDNN_INCLUDE_DIR cudnn.h HINTS ${CUDAToolkit_INCLUDE_DIRS} ${CUDAToolkit_LIBRARY_ROOT}/include)
  find_library(CUDNN_LIBRARY cudnn HINTS ${CUDAToolkit_LIBRARY_DIR} ${CUDAToolkit_LIBRARY_ROOT}/lib
    ${CUDAToolkit_LIBRARY_ROOT}/lib64)
  if(NOT CUDNN_INCLUDE_DIR OR NOT CUDNN_LIBRARY)
    message(WARNING "cuDNN not found (cudnn.h / libcudnn): memplan::cuda is not built")
  else()
    add_library(memplan_cuda_kernels STATIC
      ${PROJECT_SOURCE_DIR}/src/cuda/kernels.cu
      ${PROJECT_SOURCE_DIR}/src/cuda/backend.cpp
      # One file per layer family, as engine/cpu/ has one header per family.
      ${PROJECT_SOURCE_DIR}/src/cuda/activation.cpp
      ${PROJECT_SOURCE_DIR}/src/cuda/attention.cpp
      ${PROJECT_SOURCE_DIR}/src/cuda/conv.cpp
      ${PROJECT_SOURCE_DIR}/src/cuda/elementwise.cpp
      ${PROJECT_SOURCE_DIR}/src/cuda/embedding.cpp
      ${PROJECT_SOURCE_DIR}/src/cuda/linear.cpp
      ${PROJECT_SOURCE_DIR}/src/cuda/loss.cpp
      ${PROJECT_SOURCE_DIR}/src/cuda/norm.cpp
      ${PROJECT_SOURCE_DIR}/src/cuda/optimizer.cpp
      ${PROJECT_SOURCE_DIR}/src/cuda/pool.cpp
      ${PROJECT_SOURCE_DIR}/src/cuda/profile.cpp)
    set_target_properties(memplan_cuda_kernels PROPERTIES
      POSITION_INDEPENDENT_CODE ON CUDA_STANDARD 17 CUDA_STANDARD_REQUIRED ON EXPORT_NAME cuda_kernels)
    target_include_directories(memplan_cuda_kernels PRIVATE ${CUDNN_INCLUDE_DIR})
    target_link_libraries(memplan_cuda_kernels PUBLIC memplan CUDA::cublas CUDA::cudart ${CUDNN_LIBRARY})
    target_compile_options(memplan_cuda_kernels PRIVATE
      $<$<COMPILE_LANGUAGE:CXX>:-Wall -Wextra -Wpedantic -Wconversion -Wno-sign-conversion>)

    add_library(memplan_cuda INTERFACE)
    add_library(memplan::cuda ALIAS memplan_cuda)
    set_target_properties(memplan_cuda PROPERTIES EXPORT_NAME cuda)
    target_link_libraries(memplan_cuda INTERFACE memplan memplan_cuda_kernels)
    install(TARGETS memplan_cuda memplan_cuda_kernels EXPORT memplan-cuda-targets
      ARCHIVE DESTINATION ${CMAKE_INSTALL_LIBDIR})
    install(EXPORT memplan-cuda-targets NAMESPACE memplan:: DESTINATION ${CMAKE_INSTALL_LIBDIR}/cmake/memplan)
    set(MEMPLAN_HAS_CUDA ON)
  endif()
endif()
message(STATUS "memplan engine backends: CUDA ${MEMPLAN_HAS_CUDA}")

if(MEMPLAN_BUILD_TESTS)
  add_subdirectory(${PROJECT_SOURCE_DIR}/tests/cuda ${PROJECT_BINARY_DIR}/tests/cuda)
endif()
if(MEMPLAN_HAS_CUDA AND MEMPLAN_BUILD_EXAMPLES AND TARGET memplan::cpu)
  # train_<name>_cuda: the CPU examples' twins (same options and last line).
  # The shared driver is compiled once (it pulls in the planners and Eigen).
  add_library(memplan_cuda_example_common STATIC ${PROJECT_SOURCE_DIR}/examples/cuda/cuda_common.cpp)
  target_link_libraries(memplan_cuda_example_common PUBLIC memplan::cuda memplan_train_common PRIVATE memplan_warnings)
  foreach(example mlp cnn resnet unet transformer resnet50)
    add_executable(train_${example}_cuda ${PROJECT_SOURCE_DIR}/examples/cuda/train_${example}_cuda.cpp)
    target_link_libraries(train_${example}_cuda PRIVATE memplan_cuda_example_common memplan_warnings)
  endforeach()
  if(MEMPLAN_BUILD_TESTS)
    # Like engine.example.<name>: 5 steps at half the store-all budget; skipped without a GPU.
    foreach(example mlp cnn resnet unet transformer)
      add_test(NAME cuda.example.${example}
        COMMAND ${CMAKE_COMMAND} "-DCOMMAND=$<TARGET_FILE:train_${example}_cuda>|--steps|5|--budget|50%"
                "-DMATCH=loss [0-9.]+ naive_bytes [0-9]+ arena_bytes [0-9]+ budget_bytes [0-9]+ ms_per_step"
                -DSKIP_RC=77 -P ${PROJECT_SOURCE_DIR}/tests/run_expect.cmake)
      set_tests_properties(cuda.example.${example} PROPERTIES SKIP_REGULAR_EXPRESSION "run_expect: skipped")
    endforeach()
  endif()
  add_executable(memplan_profile_cuda ${PROJECT_SOURCE_DIR}/examples/cuda/profile_cuda.cpp)
  target_link_libraries(memplan_profile_cuda PRIVATE memplan_cuda_example_common memplan_warnings)
  target_compile_definitions(memplan_profile_cuda PRIVATE MEMPLAN_SOURCE_DIR="${PROJECT_SOURCE_DIR}")
endif()
# bench_cuda_alloc is a plain program (no Google Benchmark), built with CUDA
# alone: the GPU check builds it with the benchmarks off. Other files under
# bench/cuda/ are Google Benchmark programs, built with the benchmarks.
if(MEMPLAN_HAS_CUDA)
  add_executable(bench_cuda_alloc ${PROJECT_SOURCE_DIR}/bench/cuda/alloc.cpp)
  target_link_libraries(bench_cuda_alloc PRIVATE memplan::cuda memplan_warnings)
  if(MEMPLAN_BUILD_TESTS)
    # A short replay; skipped without a GPU (the program exits 77).
    add_test(NAME cuda.bench.alloc
      COMMAND ${CMAKE_COMMAND} "-DCOMMAND=$<TARGET_FILE:bench_cuda_alloc>|--batch|8|--steps|3|--max-seconds|60"
              "-DMATCH=alloc arena: [0-9.]+ ms/step, 0 allocations/step, peak device [0-9]+ bytes"
              -DSKIP_RC=77 -P ${PROJECT_SOURCE_DIR}/tests/run_expect.cmake)
    set_tests_properties(cuda.bench.alloc PROPERTIES SKIP_REGULAR_EXPRESSION "run_expect: skipped")
  endif()
endif()
if(MEMPLAN_HAS_CUDA AND MEMPLAN_BUILD_BENCHMARKS)
  file(GLOB memplan_cuda_benches CONFIGURE_DEPENDS ${PROJECT_SOURCE_DIR}/bench/cuda/*.cpp)
  list(REMOVE_ITEM memplan_cuda_benches ${PROJECT_SOURCE_DIR}/bench/cuda/alloc.cpp)
  if(memplan_cuda_benches)
    find_package(benchmark REQUIRED)
  endif()
  foreach(src IN LISTS memplan_cuda_benches)
    get_filename_component(name ${src} NAME_WE)
    add_executable(bench_cuda_${name} ${src})
    target_link_libraries(bench_cuda_${name} PRIVATE memplan::cuda benchmark::benchmark memplan_warnings)
  endforeach()
endif()
