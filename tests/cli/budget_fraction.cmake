# fraction:F of a peak budget, read from `plan --json`: F = 0 is the
# smallest peak found (the `floor` field), F = 1 the store-all arena, the
# budget in between grows with F, every fraction is met, and the plans
# written pass `check`. A byte budget below what any schedule needs reports
# the smallest plan found and what is live at its peak; with
# --on-infeasible smallest that plan is written and the command succeeds.
cmake_minimum_required(VERSION 3.25)
include(${CMAKE_CURRENT_LIST_DIR}/common.cmake)
memplan_fresh_dir("${WORK}")

# json_int(<out> <json> key...): a field of the report, nested keys in order.
function(json_int out json)
  string(JSON v GET "${json}" ${ARGN})
  set(${out} "${v}" PARENT_SCOPE)
endfunction()

set(last 0)
foreach(f 0 0.5 1)
  memplan_run(run plan "${GRAPH}" --budget fraction:${f} --time-limit 4 --json -o "${WORK}/plan-${f}.json")
  memplan_expect(run 0)
  json_int(budget "${run_out}" budget)
  json_int(arena "${run_out}" arena)
  json_int(store_all "${run_out}" store_all)
  string(JSON fits GET "${run_out}" fits)
  if(NOT fits OR arena GREATER budget OR budget LESS last OR budget GREATER store_all)
    message(FATAL_ERROR "fraction:${f}: budget ${budget} (previous ${last}), arena ${arena}:\n${run_out}")
  endif()
  if(f STREQUAL "0")
    json_int(floor "${run_out}" floor)
    string(JSON floor_cost GET "${run_out}" cost)
    if(NOT budget EQUAL floor OR NOT floor LESS store_all)
      message(FATAL_ERROR "fraction:0: budget ${budget}, floor ${floor}, store-all ${store_all}:\n${run_out}")
    endif()
  endif()
  if(f STREQUAL "1" AND NOT budget EQUAL store_all)
    message(FATAL_ERROR "fraction:1: budget ${budget}, store-all ${store_all}")
  endif()
  memplan_run(check check "${GRAPH}" "${WORK}/plan-${f}.json")
  memplan_expect(check 0 "^valid\n$")
  set(last ${budget})
endforeach()

# Below what any schedule needs: exit 4, the smallest plan and its peak in the report, nothing written.
memplan_run(low plan "${GRAPH}" --budget 1 --time-limit 4 --json -o "${WORK}/low.json")
memplan_expect(low 4)
json_int(small_arena "${low_out}" smallest arena)
json_int(peak_bytes "${low_out}" smallest peak bytes)
string(JSON first_live GET "${low_out}" smallest peak live 0)
if(small_arena LESS peak_bytes OR NOT first_live MATCHES "bytes" OR EXISTS "${WORK}/low.json"
   OR NOT low_err MATCHES "the smallest peak memplan reached is ${small_arena} bytes")
  message(FATAL_ERROR "smallest after a miss: arena ${small_arena}, peak ${peak_bytes}, first ${first_live}:\n${low_out}\n${low_err}")
endif()
# --on-infeasible smallest: that plan written, a warning, exit 0, fits false.
memplan_run(fallback plan "${GRAPH}" --budget 1 --on-infeasible smallest --time-limit 4 --json -o "${WORK}/small.json")
memplan_expect(fallback 0)
string(JSON fits GET "${fallback_out}" fits)
string(JSON used GET "${fallback_out}" smallest used)
json_int(arena "${fallback_out}" arena)
if(fits OR NOT used OR NOT arena EQUAL small_arena OR NOT fallback_err MATCHES "^memplan: warning: no plan within")
  message(FATAL_ERROR "--on-infeasible smallest:\n${fallback_out}\n${fallback_err}")
endif()
# At the smallest peak, the plan written recomputes no more than fraction:0's (the cheapest plan at that peak).
string(JSON fallback_cost GET "${fallback_out}" cost)
if(arena EQUAL floor AND fallback_cost GREATER floor_cost)
  message(FATAL_ERROR "--on-infeasible smallest: cost ${fallback_cost} at ${arena} bytes, fraction:0's ${floor_cost}")
endif()
memplan_run(check check "${GRAPH}" "${WORK}/small.json")
memplan_expect(check 0 "^valid\n$")
