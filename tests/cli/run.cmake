# One run of the memplan command with checks:
#   MEMPLAN   the program          ARGS   its arguments, separated by '|'
#   RC        expected exit code   STDOUT / STDERR   regexes to match
#   STDERR_LINES  exact number of stderr lines
#   NO_FILE   a path that must not exist afterwards
#   WORK      a scratch directory, made fresh; "@WORK@" in ARGS and NO_FILE
#             stands for it.
# Exit code 2 always requires stderr to be exactly one "memplan: error: " line.
cmake_minimum_required(VERSION 3.25)
include(${CMAKE_CURRENT_LIST_DIR}/common.cmake)
memplan_fresh_dir("${WORK}")
set(argv "")
if(NOT "${ARGS}" STREQUAL "")
  string(REPLACE "@WORK@" "${WORK}" ARGS "${ARGS}")
  string(REPLACE "|" ";" argv "${ARGS}")
endif()
string(REPLACE "@WORK@" "${WORK}" NO_FILE "${NO_FILE}")
memplan_run(r ${argv})

set(problems "")
if(NOT "${r_rc}" STREQUAL "${RC}")
  string(APPEND problems "exit code ${r_rc}, expected ${RC}\n")
endif()
if(NOT "${STDOUT}" STREQUAL "" AND NOT "${r_out}" MATCHES "${STDOUT}")
  string(APPEND problems "stdout does not match '${STDOUT}'\n")
endif()
if(NOT "${STDERR}" STREQUAL "" AND NOT "${r_err}" MATCHES "${STDERR}")
  string(APPEND problems "stderr does not match '${STDERR}'\n")
endif()
string(REGEX MATCHALL "\n" newlines "${r_err}")
list(LENGTH newlines n_err_lines)
if(NOT "${STDERR_LINES}" STREQUAL "" AND NOT n_err_lines EQUAL STDERR_LINES)
  string(APPEND problems "stderr has ${n_err_lines} lines, expected ${STDERR_LINES}\n")
endif()
if("${RC}" STREQUAL "2" AND NOT "${r_err}" MATCHES "^memplan: error: [^\n]+\n$")
  string(APPEND problems "stderr is not one 'memplan: error: ...' line\n")
endif()
if(NOT "${NO_FILE}" STREQUAL "" AND EXISTS "${NO_FILE}")
  string(APPEND problems "'${NO_FILE}' was written\n")
endif()
if(NOT problems STREQUAL "")
  message(FATAL_ERROR "memplan ${argv}\n${problems}--- stdout:\n${r_out}\n--- stderr:\n${r_err}")
endif()
