# Runs one program and checks both its exit code (must be 0) and its output
# (stdout and stderr together must match the regex MATCH): ctest's own
# PASS_REGULAR_EXPRESSION would ignore the exit code.
#   cmake "-DCOMMAND=prog|arg|..." "-DMATCH=regex" [-DSKIP_RC=77] -P run_expect.cmake
# With SKIP_RC, that exit code prints "run_expect: skipped" (give the test
# SKIP_REGULAR_EXPRESSION "run_expect: skipped"; cmake -P cannot exit 77).
cmake_minimum_required(VERSION 3.25)
string(REPLACE "|" ";" argv "${COMMAND}")
execute_process(COMMAND ${argv} RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
message("${out}${err}")
if(DEFINED SKIP_RC AND "${rc}" STREQUAL "${SKIP_RC}")
  message("run_expect: skipped (exit ${rc})")
  return()
endif()
if(NOT "${rc}" STREQUAL "0")
  message(FATAL_ERROR "${COMMAND}: exit code ${rc}, expected 0")
endif()
if(NOT "${out}${err}" MATCHES "${MATCH}")
  message(FATAL_ERROR "${COMMAND}: output does not match '${MATCH}'")
endif()
