# Budgets on what is saved for the backward, read from `plan --json`:
# saved:F for the peak is store-all's arena less (1 - F) of what store-all
# keeps across the boundary; under --budget-on saved the bound is on the
# bytes at the boundary (P% of store-all's resident + kept, bytes on top of
# the resident ones, saved:F), the plan keeps at most the bound less the
# resident bytes, and `check --budget-on saved` accepts the plan it writes
# (plain `check` does not know its room op).
cmake_minimum_required(VERSION 3.25)
include(${CMAKE_CURRENT_LIST_DIR}/common.cmake)
memplan_fresh_dir("${WORK}")

# memplan_json_field(<out> <json> <key>): an integer field of the report.
function(memplan_json_field out json key)
  string(JSON v GET "${json}" ${key})
  set(${out} "${v}" PARENT_SCOPE)
endfunction()

function(expect_near what got want)
  math(EXPR diff "${got} - ${want}")
  if(diff GREATER 1 OR diff LESS -1)
    message(FATAL_ERROR "${what}: ${got}, expected ${want}")
  endif()
endfunction()

# Peak: saved:0.5 = arena - (1 - 0.5) kept, rounded down.
memplan_run(peak plan "${GRAPH}" --budget saved:0.5 --time-limit 5 --json)
memplan_expect(peak 0)
memplan_json_field(budget "${peak_out}" budget)
memplan_json_field(arena "${peak_out}" store_all)
memplan_json_field(kept "${peak_out}" store_all_kept)
memplan_json_field(on "${peak_out}" budget_on)
math(EXPR want "${arena} - (${kept} + 1) / 2")
expect_near("saved:0.5 for the peak" ${budget} ${want})
if(NOT on STREQUAL "peak" OR kept LESS_EQUAL 0)
  message(FATAL_ERROR "budget_on ${on}, store_all_kept ${kept}:\n${peak_out}")
endif()

# Saved: 50% of store-all's bytes at the boundary, the plan written and checked.
memplan_run(saved plan "${GRAPH}" --budget 50% --budget-on saved --time-limit 5 --json -o "${WORK}/plan.json")
memplan_expect(saved 0)
memplan_json_field(budget "${saved_out}" budget)
memplan_json_field(resident "${saved_out}" resident)
memplan_json_field(store_kept "${saved_out}" store_all_kept)
memplan_json_field(kept "${saved_out}" kept)
memplan_json_field(room "${saved_out}" room)
memplan_json_field(planner_budget "${saved_out}" planner_budget)
memplan_json_field(arena "${saved_out}" arena)
memplan_json_field(on "${saved_out}" budget_on)
math(EXPR want "(${resident} + ${store_kept}) / 2")
expect_near("50% at the boundary" ${budget} ${want})
math(EXPR room_left "${planner_budget} - ${budget} - ${room}")
math(EXPR saved_room "${budget} - ${resident}")
if(NOT on STREQUAL "saved" OR NOT room_left EQUAL 0 OR kept GREATER saved_room OR arena GREATER planner_budget
   OR room LESS_EQUAL 0)
  message(FATAL_ERROR "kept ${kept} over ${budget} - ${resident}, or the planner's budget is not the budget + room:\n"
    "${saved_out}")
endif()
memplan_run(check check "${GRAPH}" "${WORK}/plan.json" --budget-on saved)
memplan_expect(check 0 "^valid\n$")
memplan_run(plain check "${GRAPH}" "${WORK}/plan.json")
if(NOT plain_rc EQUAL 2 OR NOT plain_err MATCHES "memplan[.]boundary_room")
  message(FATAL_ERROR "plain check of a saved plan: exit ${plain_rc}\n${plain_err}")
endif()

# Saved: bytes on top of the resident ones, and saved:F = resident + F kept.
memplan_run(bytes plan "${GRAPH}" --budget 1000000 --budget-on saved --remat store_all --time-limit 5 --json)
memplan_json_field(budget "${bytes_out}" budget)
memplan_json_field(resident "${bytes_out}" resident)
math(EXPR want "${resident} + 1000000")
expect_near("bytes at the boundary" ${budget} ${want})
memplan_run(frac plan "${GRAPH}" --budget saved:0.5 --budget-on saved --remat store_all --time-limit 5 --json)
memplan_json_field(budget "${frac_out}" budget)
memplan_json_field(resident "${frac_out}" resident)
memplan_json_field(store_kept "${frac_out}" store_all_kept)
math(EXPR want "${resident} + ${store_kept} / 2")
expect_near("saved:0.5 at the boundary" ${budget} ${want})
