// The device profiles now live in the cost layer (cost/device.hpp); this
// header keeps the names nn:: code has always used.
#pragma once

#include <memplan/cost/device.hpp>

namespace memplan::nn {
using cost::compute_kind;
using cost::device_profile;
using cost::device_profiles;
using cost::find_device;
using cost::h100;
using cost::h200;
using cost::precision;
using cost::roofline_us;
using cost::v100;
} // namespace memplan::nn
