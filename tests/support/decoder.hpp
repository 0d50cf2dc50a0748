// The zoo's decoder at test size: the `tiny` preset with `layers` blocks,
// 2 x 64 tokens, priced on the H100 roofline.
#pragma once

#include <memplan/zoo/zoo.hpp>

#include <cstddef>

namespace memplan::testing {

inline graph tiny_decoder(std::size_t layers = 4) {
    zoo_options o;
    o.preset = "tiny";
    o.llama.layers = layers;
    o.batch = 2;
    o.seq = 64;
    o.cost = cost::cost_model(cost::roofline{nn::h100});
    return zoo_graph("llama", o);
}

} // namespace memplan::testing
