#include <memplan/graph/validate.hpp> // IWYU pragma: associated
