// A forward network: a DAG of layer applications over named activations.
//
// `input()` declares data the step is fed (images, token ids, labels);
// `add(layer, {inputs...}, name)` applies a layer, creates its parameters
// "<name>.<suffix>" and returns a handle to its output activation
// "<name>.y". Residual adds, Inception's concatenations and U-Net's skips
// are plain multi-input layers; tied weights (GPT-2's LM head) reuse an
// existing parameter. Shapes are inferred eagerly, so a bad model fails at the
// layer that does not fit, with that layer's name in the message.
#pragma once

#include <memplan/core/error.hpp>
#include <memplan/nn/layer.hpp>

#include <algorithm>
#include <cstdint>
#include <limits>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <utility>
#include <vector>

namespace memplan::nn {

/// Handle to an activation of a network.
struct value {
    std::uint32_t id = 0;
    friend bool operator==(const value&, const value&) = default;
};

/// A parameter (trainable) or persistent state tensor (running statistics).
struct parameter {
    std::string name; ///< "layer1.0.conv1.w"
    nn::shape shape;
    bool trainable = true;
    param_role role = param_role::weight; ///< what it is to the layer that created it
};

/// One activation: a network input or a layer's output.
struct activation {
    static constexpr std::uint32_t no_node = std::numeric_limits<std::uint32_t>::max();
    std::string name; ///< its tensor name: the input's name, or "<layer>.y"
    tensor_info info;
    std::uint32_t producer = no_node; ///< index of the node, or no_node for inputs
};

/// One layer application.
struct node {
    std::string name;
    nn::layer layer;
    std::vector<value> inputs;
    value output;
    std::vector<std::uint32_t> params; ///< trainable parameters, in slot order
    std::vector<std::uint32_t> state;  ///< persistent state, in slot order
};

class network {
public:
    explicit network(std::string name = "network") : name_(std::move(name)) {}

    const std::string& name() const noexcept { return name_; }

    /// Declares data fed to the step. Throws when the name is empty or taken.
    value input(std::string name, nn::shape s, element e = element::floating) {
        if (name.empty()) throw error("nn", "network '" + name_ + "': an input has an empty name");
        claim(name, "input");
        activations_.push_back({std::move(name), {std::move(s), e}, activation::no_node});
        return {static_cast<std::uint32_t>(activations_.size() - 1)};
    }

    /// Applies `l` to `inputs` under the unique `name` and returns its output.
    /// `tied` maps parameter suffixes of `l` to existing parameters to reuse
    /// (same shape required), e.g. {{"w", "wte.w"}}. Throws on a shape error
    /// (naming the layer), a duplicate name or an unknown handle.
    value add(nn::layer l, std::vector<value> inputs, std::string name,
              const std::vector<std::pair<std::string, std::string>>& tied = {}) {
        if (name.empty()) throw error("nn", "network '" + name_ + "': a layer has an empty name");
        std::vector<tensor_info> in;
        for (const auto& v : inputs) {
            if (v.id >= activations_.size())
                throw error("nn", "layer '" + name + "' names activation #" + std::to_string(v.id) +
                                      " which does not exist");
            in.push_back(activations_[v.id].info);
        }
        if (names_.contains(name))
            throw error("nn", "network '" + name_ + "': layer name '" + name + "' is already taken");
        tensor_info out = nn::infer(l, in, name);
        node n{name, std::move(l), std::move(inputs), {}, {}, {}};
        // Resolve ties first so that a bad tie leaves the network unchanged.
        auto specs = params_of(n.layer, in);
        std::vector<std::optional<std::uint32_t>> reuse(specs.size());
        for (std::size_t i = 0; i < specs.size(); ++i) {
            const auto& p = specs[i];
            auto it = std::find_if(tied.begin(), tied.end(), [&](const auto& t) { return t.first == p.suffix(); });
            if (it == tied.end()) continue;
            auto found = find_parameter(it->second);
            if (!found)
                throw error("nn", "layer '" + name + "' ties '" + p.suffix() + "' to parameter '" + it->second +
                                      "' which does not exist");
            const auto& q = params_[*found];
            if (q.shape != p.shape || q.trainable != p.trainable)
                throw error("nn", "layer '" + name + "' ties '" + p.suffix() + "' " + p.shape.to_string() +
                                      " to parameter '" + q.name + "' " + q.shape.to_string() + " which does not match");
            reuse[i] = *found;
        }
        for (std::size_t i = 0; i < specs.size(); ++i) {
            auto id = reuse[i].value_or(static_cast<std::uint32_t>(params_.size()));
            if (!reuse[i]) {
                std::string full = name + "." + specs[i].suffix();
                param_ids_.emplace(full, id);
                params_.push_back({std::move(full), std::move(specs[i].shape), specs[i].trainable, specs[i].role});
            }
            (params_[id].trainable ? n.params : n.state).push_back(id);
        }
        claim(name, "layer");
        const auto node_id = static_cast<std::uint32_t>(nodes_.size());
        activations_.push_back({name + ".y", std::move(out), node_id});
        n.output = {static_cast<std::uint32_t>(activations_.size() - 1)};
        const value result = n.output;
        nodes_.push_back(std::move(n));
        return result;
    }

    /// Which activation is the loss (default: the output of the last layer).
    void set_loss(value v) {
        if (v.id >= activations_.size()) throw error("nn", "network '" + name_ + "': the loss names no activation");
        loss_ = v;
    }
    /// The loss activation. Throws when the network has no layers.
    value loss() const {
        if (loss_) return *loss_;
        if (nodes_.empty()) throw error("nn", "network '" + name_ + "' has no layers");
        return nodes_.back().output;
    }

    const std::vector<node>& nodes() const noexcept { return nodes_; }
    const std::vector<activation>& activations() const noexcept { return activations_; }
    const std::vector<parameter>& parameters() const noexcept { return params_; }
    const activation& at(value v) const { return activations_.at(v.id); }
    const tensor_info& info(value v) const { return activations_.at(v.id).info; }

    std::optional<std::uint32_t> find_parameter(std::string_view name) const {
        if (auto it = param_ids_.find(std::string(name)); it != param_ids_.end()) return it->second;
        return std::nullopt;
    }

private:
    void claim(const std::string& name, std::string_view what) {
        if (!names_.emplace(name, 0).second)
            throw error("nn", "network '" + name_ + "': " + std::string(what) + " name '" + name + "' is already taken");
    }

    std::string name_;
    std::vector<node> nodes_;
    std::vector<activation> activations_;
    std::vector<parameter> params_;
    std::unordered_map<std::string, std::uint32_t> param_ids_;
    std::unordered_map<std::string, int> names_;
    std::optional<value> loss_;
};

/// Number of trainable values (what papers and torchvision report; running
/// statistics are not counted, tied parameters count once).
inline std::uint64_t parameter_count(const network& net) {
    std::uint64_t n = 0;
    for (const auto& p : net.parameters())
        if (p.trainable) n += p.shape.numel();
    return n;
}

/// FLOPs of one forward pass (the sum over forward op specs).
inline double forward_flops(const network& net) {
    double f = 0;
    for (const auto& n : net.nodes()) {
        std::vector<tensor_info> in;
        for (auto v : n.inputs) in.push_back(net.info(v));
        for (const auto& op : lower(n.layer, {in, net.info(n.output)}).forward) f += op.flops;
    }
    return f;
}

} // namespace memplan::nn
