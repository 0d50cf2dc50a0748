// The plan type, where planners' users look for it. It lives in
// schedule/plan.hpp, below check/ (the validator reads plans) and plan/ (the
// planners check what they return), so that the layers only point down.
#pragma once

#include <memplan/schedule/plan.hpp>
