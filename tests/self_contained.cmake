# A clone must be complete on its own: no tracked file may read or name the
# folder beside the checkout that this project once drew its data and notes
# from. Run as: cmake -DSOURCE_DIR=<repo> -DGIT=<git> -P self_contained.cmake
# Outside a git checkout (a source archive) there is nothing to list, and the
# test reports itself skipped.
cmake_minimum_required(VERSION 3.25)

# Bracket expressions, so that this file does not match its own patterns.
set(patterns -e "[.][.]/shared" -e "anchors[.]md" -e "shared[/]guide" -e "shared[/]data")

if("${GIT}" STREQUAL "" OR NOT EXISTS "${GIT}")
  message("memplan-self-contained: skipped, git not found")
  return()
endif()
execute_process(COMMAND "${GIT}" -C "${SOURCE_DIR}" rev-parse --is-inside-work-tree
  RESULT_VARIABLE in_tree OUTPUT_QUIET ERROR_QUIET)
if(NOT in_tree EQUAL 0)
  message("memplan-self-contained: skipped, ${SOURCE_DIR} is not a git checkout")
  return()
endif()

# git grep: exit 0 = matches, 1 = none, anything else = git failed.
execute_process(COMMAND "${GIT}" -C "${SOURCE_DIR}" grep -n -I ${patterns}
  RESULT_VARIABLE rc OUTPUT_VARIABLE hits ERROR_VARIABLE err)
if(rc EQUAL 1)
  return()
endif()
if(rc EQUAL 0)
  message(FATAL_ERROR "tracked files name a path outside the repository:\n${hits}")
endif()
message(FATAL_ERROR "git grep failed (${rc}): ${err}")
