#include <memplan/graph/graph.hpp> // IWYU pragma: associated
