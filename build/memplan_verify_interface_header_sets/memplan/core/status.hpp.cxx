#include <memplan/core/status.hpp> // IWYU pragma: associated
