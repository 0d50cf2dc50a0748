#include <memplan/core/error.hpp> // IWYU pragma: associated
