# Offset assignment of CSV with ALLOC: the written file passes check-csv;
# with --capacity 1 the command exits 1 and writes nothing.
cmake_minimum_required(VERSION 3.25)
include(${CMAKE_CURRENT_LIST_DIR}/common.cmake)
memplan_fresh_dir("${WORK}")
if(NOT DEFINED SOLVER)
  set(SOLVER glpk)
endif()
memplan_run(alloc alloc --input "${CSV}" --output "${WORK}/out.csv" --alloc "${ALLOC}" --solver "${SOLVER}" --time-limit 2)
memplan_expect(alloc 0 "height: .*lower bound: .*wrote ")
memplan_run(check check-csv "${WORK}/out.csv")
memplan_expect(check 0 "^valid: height [0-9]+, lower bound [0-9]+")
memplan_run(tight alloc --input "${CSV}" --output "${WORK}/tight.csv" --alloc "${ALLOC}" --solver "${SOLVER}"
            --time-limit 2 --capacity 1)
memplan_expect(tight 1 "over capacity|status: +infeasible")
if(EXISTS "${WORK}/tight.csv")
  message(FATAL_ERROR "--capacity 1 wrote ${WORK}/tight.csv")
endif()
