#include <memplan/plan/bounds.hpp> // IWYU pragma: associated
