# Helpers shared by the command-line test scripts (cmake -P).
cmake_minimum_required(VERSION 3.25)

# memplan_run(<prefix> arg...): runs ${MEMPLAN} with the arguments; sets
# <prefix>_rc, <prefix>_out and <prefix>_err.
function(memplan_run prefix)
  execute_process(COMMAND "${MEMPLAN}" ${ARGN}
    RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
  set(${prefix}_rc "${rc}" PARENT_SCOPE)
  set(${prefix}_out "${out}" PARENT_SCOPE)
  set(${prefix}_err "${err}" PARENT_SCOPE)
endfunction()

# memplan_expect(<prefix> <rc> [stdout-regex]): fails the test, showing the
# command's output, unless the exit code is <rc> and stdout matches.
function(memplan_expect prefix rc)
  set(ok TRUE)
  if(NOT "${${prefix}_rc}" STREQUAL "${rc}")
    set(ok FALSE)
  endif()
  if(ARGC GREATER 2 AND NOT "${${prefix}_out}" MATCHES "${ARGV2}")
    set(ok FALSE)
  endif()
  if(NOT ok)
    message(FATAL_ERROR "${prefix}: expected exit ${rc}${ARGV2}, got ${${prefix}_rc}\n"
      "--- stdout:\n${${prefix}_out}\n--- stderr:\n${${prefix}_err}")
  endif()
endfunction()

function(memplan_fresh_dir dir)
  file(REMOVE_RECURSE "${dir}")
  file(MAKE_DIRECTORY "${dir}")
endfunction()
