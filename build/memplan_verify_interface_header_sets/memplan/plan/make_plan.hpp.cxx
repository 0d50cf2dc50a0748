#include <memplan/plan/make_plan.hpp> // IWYU pragma: associated
