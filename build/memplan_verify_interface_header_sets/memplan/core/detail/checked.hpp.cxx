#include <memplan/core/detail/checked.hpp> // IWYU pragma: associated
