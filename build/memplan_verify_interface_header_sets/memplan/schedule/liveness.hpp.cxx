#include <memplan/schedule/liveness.hpp> // IWYU pragma: associated
