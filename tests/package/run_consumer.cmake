# Builds and runs the outside project in consumer/ against memplan.
#   MODE=find_package: install memplan's build tree to a private prefix first.
#   MODE=add_subdirectory: the consumer pulls memplan's source tree in.
file(REMOVE_RECURSE ${WORK_DIR})

function(run_step what)
  execute_process(COMMAND ${ARGN} RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
  if(NOT rc EQUAL 0)
    message(FATAL_ERROR "${what} failed (${rc}):\n${out}\n${err}")
  endif()
  message(STATUS "${out}")
endfunction()

set(prefix ${WORK_DIR}/prefix)
if(MODE STREQUAL "find_package")
  run_step("install" ${CMAKE_COMMAND} --install ${MEMPLAN_BINARY_DIR} --prefix ${prefix})
endif()
run_step("configure" ${CMAKE_COMMAND} -S ${CONSUMER_DIR} -B ${WORK_DIR}/build -G ${GENERATOR}
  -DCMAKE_CXX_COMPILER=${CXX_COMPILER} -DCMAKE_BUILD_TYPE=Release
  -DCMAKE_PREFIX_PATH=${prefix} -DMODE=${MODE} -DMEMPLAN_SOURCE_DIR=${MEMPLAN_SOURCE_DIR})
run_step("build" ${CMAKE_COMMAND} --build ${WORK_DIR}/build)
execute_process(COMMAND ${WORK_DIR}/build/consumer RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
message("${out}${err}")
if(NOT rc EQUAL 0)
  message(FATAL_ERROR "consumer exited with ${rc}")
endif()
if(NOT "${out}" MATCHES "consumer: valid plan")
  message(FATAL_ERROR "consumer did not report a valid plan")
endif()
