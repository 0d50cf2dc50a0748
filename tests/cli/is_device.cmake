# Fails unless PATH is a character device (a rename over /dev/null would have
# made it a regular file). cmake -DPATH=... -P is_device.cmake
cmake_minimum_required(VERSION 3.25)
execute_process(COMMAND stat -c %F "${PATH}" OUTPUT_VARIABLE kind OUTPUT_STRIP_TRAILING_WHITESPACE RESULT_VARIABLE rc)
if(NOT rc EQUAL 0 OR NOT kind STREQUAL "character special file")
  message(FATAL_ERROR "${PATH} is '${kind}', not a character device")
endif()
