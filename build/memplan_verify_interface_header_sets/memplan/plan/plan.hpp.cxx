#include <memplan/plan/plan.hpp> // IWYU pragma: associated
