#include <memplan/plan/alloc/problem.hpp> // IWYU pragma: associated
