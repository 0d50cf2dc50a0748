# Runs one program and checks both its exit code (must be 0) and its output
# (stdout and stderr together must match the regex MATCH): ctest's own
# PASS_REGULAR_EXPRESSION would ignore the exit code.
#   cmake "-DCOMMAND=prog|arg|..." "-DMATCH=regex" -P run_expect.cmake
cmake_minimum_required(VERSION 3.25)
string(REPLACE "|" ";" argv "${COMMAND}")
execute_process(COMMAND ${argv} RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
message("${out}${err}")
if(NOT "${rc}" STREQUAL "0")
  message(FATAL_ERROR "${COMMAND}: exit code ${rc}, expected 0")
endif()
if(NOT "${out}${err}" MATCHES "${MATCH}")
  message(FATAL_ERROR "${COMMAND}: output does not match '${MATCH}'")
endif()
