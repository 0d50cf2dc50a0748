#include <memplan/schedule/schedule.hpp> // IWYU pragma: associated
