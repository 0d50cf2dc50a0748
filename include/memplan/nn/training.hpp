// Derivation of the training graph of a forward network.
//
// The graph runs one training step as a framework would: the forward ops in
// network order (the loss last), then each layer's backward ops in reverse
// order, then one optimizer update per parameter. Where an activation or a
// tied parameter feeds several layers, its gradient contributions are summed
// as they arrive (in-place accumulation, as PyTorch's autograd does), so the
// sum is complete before its producer's backward runs. Weights and optimizer
// state are persistent. Every op is priced in microseconds by a cost model
// (cost/model.hpp: the roofline of one device by default, the fused roofline,
// or measured costs); sizes follow the run's data type.
// Names: "<layer>.y", "<layer>.fwd", "<layer>.bwd_data", "<layer>.dx",
// "<layer>.dw", "<layer>.dy" (a summed gradient), "<param>.update".
#pragma once

#include <memplan/core/error.hpp>
#include <memplan/cost/model.hpp>
#include <memplan/graph/graph.hpp>
#include <memplan/nn/device.hpp>
#include <memplan/nn/dtype.hpp>
#include <memplan/nn/network.hpp>

#include <algorithm>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace memplan {

/// The update rule; its state tensors are persistent.
enum class optimizer : std::uint8_t {
    sgd,          ///< no state
    sgd_momentum, ///< one momentum buffer per parameter
    adam,         ///< first and second moments per parameter
    adamw,        ///< Adam with decoupled weight decay (Loshchilov and Hutter 2019): the same state
};

constexpr std::string_view to_string(optimizer o) noexcept {
    switch (o) {
    case optimizer::sgd: return "sgd";
    case optimizer::sgd_momentum: return "sgd_momentum";
    case optimizer::adam: return "adam";
    case optimizer::adamw: return "adamw";
    }
    return "sgd_momentum";
}

/// Accepts "sgd_momentum" and the command line's "sgd" as SGD with momentum,
/// "sgd_plain" for SGD without state, "adam" and "adamw".
constexpr std::optional<optimizer> parse_optimizer(std::string_view s) noexcept {
    if (s == "sgd" || s == "sgd_momentum") return optimizer::sgd_momentum;
    if (s == "sgd_plain") return optimizer::sgd;
    if (s == "adam") return optimizer::adam;
    if (s == "adamw") return optimizer::adamw;
    return std::nullopt;
}

struct training_options {
    optimizer opt = optimizer::sgd_momentum;
    nn::dtype dt = nn::dtype::fp32;
    /// Mixed precision as it is trained (Micikevicius et al. 2018): with a
    /// half-precision `dt`, weights, activations and gradients are `dt`, and
    /// each trained parameter also has an fp32 master copy; the optimizer
    /// state is then fp32 too. With Adam that is 2 + 2 + 12 bytes per
    /// parameter (ZeRO's accounting, Rajbhandari et al. 2020). No effect with
    /// fp32.
    bool master_weights = false;
    /// Fully sharded data parallelism (ZeRO-3, Rajbhandari et al. 2020;
    /// PyTorch's FSDP): every trained parameter, its gradient and its
    /// optimizer state are split over `shard` ranks, and the graph is one
    /// rank's step. A layer's forward and backward each gather the full
    /// weight just before they run (`<param>.all_gather`,
    /// `<param>.all_gather_bwd`, freed after the layer: FSDP's
    /// reshard-after-forward), and a parameter's summed gradient is
    /// reduce-scattered to its shard (`<param>.reduce_scatter`) before the
    /// update. The collectives cost 0: they are taken as overlapped with
    /// compute (FSDP prefetches the next layer's gather), so overheads are
    /// recomputation's alone. 1: no sharding. Planning only: the engines run
    /// one rank without collectives.
    std::size_t shard = 1;
    nn::device_profile device = nn::v100; ///< the roofline's device when `cost` is empty
    /// How ops are priced; empty: `cost::roofline{device}`. A `measured`
    /// model also sets workspaces to the measured ones and drops variants
    /// the measurement lacks (a backend that cannot run them).
    std::optional<cost::cost_model> cost;
    std::string name; ///< graph name; empty: "<network>-train"
};

/// Where an op of a training graph came from, so that an engine can run it:
/// a forward or backward op spec of a network node (with the graph tensor of
/// every slot the spec names; npos where the derivation dropped an input
/// gradient nobody needs), a gradient accumulation (inputs: the running sum
/// and the new contribution; output: the sum, possibly in place), or the
/// optimizer update of a parameter (inputs: the parameter, its gradient, then
/// the optimizer state in the order momentum / adam_m, adam_v, then the fp32
/// master copy when the options keep one).
enum class op_origin_kind : std::uint8_t { layer, grad_acc, update };

struct op_origin {
    op_origin_kind kind = op_origin_kind::layer;
    std::uint32_t node = 0;  ///< layer: index into net.nodes()
    std::uint32_t spec = 0;  ///< layer: index into the node's forward or backward specs (by `backward`)
    bool backward = false;   ///< layer: which spec list `spec` indexes
    std::uint32_t param = 0; ///< update: index into net.parameters()
    std::vector<std::pair<nn::slot, graph::id_type>> slots; ///< layer: slot -> tensor (npos: not bound)
};

/// Per graph op its origin, and per graph tensor its shape and element type.
struct training_program {
    std::vector<op_origin> ops;
    std::vector<nn::tensor_info> tensors;
};

namespace detail {

class training_builder {
public:
    training_builder(const nn::network& net, const training_options& opt, training_program* program = nullptr)
        : net_(net), opt_(opt), g_(opt.name.empty() ? net.name() + "-train" : opt.name), program_(program),
          model_(opt.cost ? *opt.cost : cost::cost_model(cost::roofline{opt.device})) {
        g_.set_costs_from(std::string(cost::microseconds), model_.name());
        if (opt.shard == 0) throw error("nn", "training option shard: at least 1 rank, got 0");
        if (opt.shard > 1 && program)
            throw error("nn", "network '" + net.name() + "': a sharded training graph (shard " +
                                  std::to_string(opt.shard) + ") is for planning; the engines run one rank without collectives");
    }

    graph build() {
        const auto& nodes = net_.nodes();
        const auto& acts = net_.activations();
        const nn::value loss = net_.loss();
        if (acts[loss.id].producer == nn::activation::no_node)
            throw error("nn", "network '" + net_.name() + "': the loss '" + acts[loss.id].name +
                                  "' is an input, not a layer output");

        // Graph inputs and parameters first, so they read well at the top of a file.
        act_tensor_.assign(acts.size(), graph::npos);
        for (std::size_t a = 0; a < acts.size(); ++a)
            if (acts[a].producer == nn::activation::no_node)
                act_tensor_[a] = new_tensor(acts[a].name, acts[a].info);
        // (The parameters are made after the gradient counts below: a
        // sharded one is a shard.)

        // Which activations carry gradients: outputs of layers with trainable
        // parameters or with an input that carries one.
        requires_grad_.assign(acts.size(), false);
        lowered_.reserve(nodes.size());
        for (const auto& n : nodes) {
            bool rg = !n.params.empty();
            for (auto v : n.inputs) rg = rg || requires_grad_[v.id];
            requires_grad_[n.output.id] = rg;
            std::vector<nn::tensor_info> in;
            for (auto v : n.inputs) in.push_back(acts[v.id].info);
            lowered_.push_back(nn::lower(n.layer, {in, acts[n.output.id].info}));
        }

        // Which layers the loss's gradient reaches, and how many contributions
        // each activation's and each parameter's gradient will sum.
        const std::uint32_t loss_node = acts[loss.id].producer;
        std::vector<char> reached(nodes.size(), 0);
        reached[loss_node] = 1;
        expected_.assign(acts.size(), 0);
        expected_param_.assign(net_.parameters().size(), 0);
        for (std::size_t i = nodes.size(); i-- > 0;) {
            if (!reached[i]) continue;
            for (auto v : nodes[i].inputs)
                if (requires_grad_[v.id]) {
                    ++expected_[v.id];
                    reached[acts[v.id].producer] = 1;
                }
            for (auto p : nodes[i].params) ++expected_param_[p];
        }
        for (std::size_t p = 0; p < net_.parameters().size(); ++p) {
            const auto& x = net_.parameters()[p];
            param_tensor_.push_back(sharded(p) ? new_shard(x.name + ".shard", {x.shape, nn::element::floating})
                                               : new_tensor(x.name, {x.shape, nn::element::floating}, true));
        }
        gathered_.assign(net_.parameters().size(), graph::npos);
        fwd_gathers_.assign(net_.parameters().size(), 0);
        bwd_gathers_.assign(net_.parameters().size(), 0);

        // Forward.
        internal_tensor_.assign(nodes.size(), {});
        for (std::size_t i = 0; i < nodes.size(); ++i) {
            const auto& n = nodes[i];
            std::fill(gathered_.begin(), gathered_.end(), graph::npos);
            act_tensor_[n.output.id] = new_tensor(acts[n.output.id].name, acts[n.output.id].info);
            for (std::size_t k = 0; k < lowered_[i].forward.size(); ++k) emit(i, lowered_[i].forward[k], k, false);
        }
        g_.add_output(act_tensor_[loss.id]);

        // Backward, in reverse network order.
        in_backward_ = true;
        grad_.assign(acts.size(), graph::npos);
        got_.assign(acts.size(), 0);
        param_grad_.assign(net_.parameters().size(), graph::npos);
        got_param_.assign(net_.parameters().size(), 0);
        for (std::size_t i = nodes.size(); i-- > 0;) {
            if (!reached[i]) continue;
            const auto& n = nodes[i];
            if (i != loss_node && grad_[n.output.id] == graph::npos) continue; // no gradient arrives
            current_grad_in_.assign(n.inputs.size(), graph::npos);
            current_grad_param_.assign(n.params.size(), graph::npos);
            std::fill(gathered_.begin(), gathered_.end(), graph::npos); // each layer's pass gathers its own
            for (std::size_t k = 0; k < lowered_[i].backward.size(); ++k) emit(i, lowered_[i].backward[k], k, true);
            const auto& pass = lowered_[i].passthrough;
            for (std::size_t k = 0; k < n.inputs.size(); ++k) {
                const auto v = n.inputs[k];
                if (!requires_grad_[v.id]) continue;
                const bool through = k < pass.size() && pass[k];
                const auto t = through ? grad_[n.output.id] : current_grad_in_[k];
                if (t == graph::npos)
                    throw error("nn", "layer '" + n.name + "' (" + std::string(nn::kind_of(n.layer)) +
                                          ") produces no gradient for its input " + std::to_string(k));
                contribute(grad_[v.id], got_[v.id], expected_[v.id], t, nodes[acts[v.id].producer].name, ".dy",
                           acts[v.id].info);
            }
            for (std::size_t k = 0; k < n.params.size(); ++k) {
                const auto p = n.params[k];
                if (current_grad_param_[k] == graph::npos)
                    throw error("nn", "layer '" + n.name + "' (" + std::string(nn::kind_of(n.layer)) +
                                          ") produces no gradient for parameter '" + net_.parameters()[p].name + "'");
                contribute(param_grad_[p], got_param_[p], expected_param_[p], current_grad_param_[k],
                           net_.parameters()[p].name, ".grad", {net_.parameters()[p].shape, nn::element::floating});
                if (sharded(p) && got_param_[p] == expected_param_[p]) emit_reduce_scatter(p);
            }
        }

        // Optimizer updates, one per trained parameter.
        for (std::size_t p = 0; p < net_.parameters().size(); ++p)
            if (param_grad_[p] != graph::npos) emit_update(p);
        return std::move(g_);
    }

private:
    std::uint64_t bytes(const nn::tensor_info& t) const { return t.bytes(opt_.dt); }

    /// Whether parameter `p` is split over the ranks: sharding is on and it is trained.
    bool sharded(std::size_t p) const { return opt_.shard > 1 && expected_param_[p] > 0; }

    /// A persistent tensor holding one rank's share of `info` (rounded up).
    graph::id_type new_shard(const std::string& name, const nn::tensor_info& info) {
        return g_.add_tensor(name, (bytes(info) + opt_.shard - 1) / opt_.shard, true);
    }

    /// The full weight of sharded parameter `p` for the layer being emitted:
    /// gathered by an op of the pass's phase on first use in the layer.
    graph::id_type gather(std::size_t p) {
        if (gathered_[p] != graph::npos) return gathered_[p];
        const auto& x = net_.parameters()[p];
        const bool backward = in_backward_;
        const auto uses = ++(backward ? bwd_gathers_ : fwd_gathers_)[p]; // a tied weight's second use: "...2"
        const std::string k = uses > 1 ? std::to_string(uses) : "";
        op o;
        o.name = x.name + (backward ? ".all_gather_bwd" : ".all_gather") + k;
        o.phase = backward ? phase::backward : phase::forward;
        o.inputs = {param_tensor_[p]};
        o.outputs = {g_.add_tensor(x.name + (backward ? ".full_bwd" : ".full") + k, bytes({x.shape, nn::element::floating}), false)};
        o.cost = 0; // overlapped with compute (training_options::shard)
        add_op(std::move(o));
        return gathered_[p] = g_.op(static_cast<graph::id_type>(g_.num_ops() - 1)).outputs[0];
    }

    /// Reduce-scatters the summed gradient of sharded parameter `p` to its shard.
    void emit_reduce_scatter(std::size_t p) {
        const auto& x = net_.parameters()[p];
        op o;
        o.name = x.name + ".reduce_scatter";
        o.phase = phase::backward;
        o.inputs = {param_grad_[p]};
        const auto shard = g_.add_tensor(x.name + ".grad_shard",
                                         (bytes({x.shape, nn::element::floating}) + opt_.shard - 1) / opt_.shard, false);
        o.outputs = {shard};
        o.cost = 0; // overlapped with compute (training_options::shard)
        add_op(std::move(o));
        param_grad_[p] = shard;
    }

    graph::id_type new_tensor(const std::string& name, const nn::tensor_info& info, bool persistent = false) {
        const auto id = g_.add_tensor(name, bytes(info), persistent);
        if (program_) program_->tensors.push_back(info);
        return id;
    }

    void record(op_origin o) {
        if (program_) program_->ops.push_back(std::move(o));
    }

    static std::string grad_input_name(const nn::node& n, std::uint32_t k) {
        return n.name + (n.inputs.size() == 1 ? ".dx" : ".dx" + std::to_string(k));
    }

    /// The graph tensor of a slot of node `i`, created on first use; npos
    /// when the slot is an input gradient nobody needs.
    graph::id_type bind(std::size_t i, nn::slot s, bool as_output) {
        const auto& n = net_.nodes()[i];
        const auto& acts = net_.activations();
        auto check = [&](std::size_t k, std::size_t size, std::string_view what) {
            if (k >= size)
                throw error("nn", "layer '" + n.name + "' (" + std::string(nn::kind_of(n.layer)) + ") names " +
                                      std::string(what) + " " + std::to_string(k) + " which it does not have");
        };
        switch (s.kind) {
        case nn::slot_kind::input: check(s.index, n.inputs.size(), "input"); return act_tensor_[n.inputs[s.index].id];
        case nn::slot_kind::output: return act_tensor_[n.output.id];
        case nn::slot_kind::param:
            check(s.index, n.params.size(), "parameter");
            return sharded(n.params[s.index]) ? gather(n.params[s.index]) : param_tensor_[n.params[s.index]];
        case nn::slot_kind::state: check(s.index, n.state.size(), "state"); return param_tensor_[n.state[s.index]];
        case nn::slot_kind::internal: {
            const auto& specs = lowered_[i].internals;
            check(s.index, specs.size(), "internal tensor");
            auto& ids = internal_tensor_[i];
            if (ids.empty()) ids.assign(specs.size(), graph::npos);
            if (ids[s.index] == graph::npos)
                ids[s.index] = new_tensor(n.name + "." + specs[s.index].suffix, specs[s.index].info);
            return ids[s.index];
        }
        case nn::slot_kind::grad_output:
            if (grad_[n.output.id] == graph::npos)
                throw error("nn", "layer '" + n.name + "' (" + std::string(nn::kind_of(n.layer)) +
                                      ") reads the gradient of its output, which has none");
            return grad_[n.output.id];
        case nn::slot_kind::grad_input: {
            check(s.index, n.inputs.size(), "input");
            const auto v = n.inputs[s.index];
            if (!requires_grad_[v.id]) return graph::npos;
            if (current_grad_in_[s.index] == graph::npos) {
                if (!as_output)
                    throw error("nn", "layer '" + n.name + "' reads the gradient of input " +
                                          std::to_string(s.index) + " before producing it");
                current_grad_in_[s.index] = new_tensor(grad_input_name(n, s.index), acts[v.id].info);
            }
            return current_grad_in_[s.index];
        }
        case nn::slot_kind::grad_param: {
            check(s.index, n.params.size(), "parameter");
            if (current_grad_param_[s.index] == graph::npos) {
                const auto& p = net_.parameters()[n.params[s.index]];
                const auto suffix = p.name.substr(p.name.rfind('.') + 1);
                current_grad_param_[s.index] = new_tensor(n.name + ".d" + suffix, {p.shape, nn::element::floating});
            }
            return current_grad_param_[s.index];
        }
        }
        return graph::npos;
    }

    /// The time of op `name` (or its variant `variant`) by the cost model.
    double cost(std::string_view name, std::string_view variant, nn::compute_kind kind, double flops,
                const std::vector<graph::id_type>& in, const std::vector<graph::id_type>& out,
                double time_factor = 1.0) const {
        cost::op_work w{name, variant, kind, flops, 0, 0, 0, time_factor};
        // Matrix products run at the training dtype's rate (tensor cores for fp16/bf16).
        w.matmul_precision = opt_.dt == nn::dtype::fp32 ? cost::precision::fp32 : cost::precision::half;
        for (auto t : in) {
            const double b = double(g_.tensor(t).bytes);
            w.bytes_read += b;
            if (t < produced_.size() && produced_[t]) w.producer_bytes += b;
        }
        for (auto t : out) w.bytes_written += double(g_.tensor(t).bytes);
        return model_.op_us(w);
    }

    void add_op(op o) {
        for (auto t : o.outputs) {
            if (t >= produced_.size()) produced_.resize(std::size_t(t) + 1, 0);
            produced_[t] = !g_.tensor(t).persistent;
        }
        g_.add_op(std::move(o));
    }

    void emit(std::size_t i, const nn::op_spec& spec, std::size_t spec_index, bool backward) {
        const auto& n = net_.nodes()[i];
        op o;
        o.name = n.name + "." + spec.suffix();
        o.phase = spec.phase;
        std::vector<std::pair<nn::slot, graph::id_type>> bound;
        for (auto s : spec.outputs) {
            const auto t = bind(i, s, true);
            if (t != graph::npos) o.outputs.push_back(t);
            bound.push_back({s, t});
        }
        if (o.outputs.empty()) return; // e.g. backward-data of a layer fed by data
        for (auto s : spec.inputs) {
            const auto t = bind(i, s, false);
            o.inputs.push_back(t);
            bound.push_back({s, t});
        }
        auto find = [&](nn::slot s) {
            for (auto [x, t] : bound)
                if (x == s) return t;
            return graph::npos;
        };
        for (auto [x, y] : spec.inplace) {
            const auto tx = find(x), ty = find(y);
            if (tx != graph::npos && ty != graph::npos) o.inplace.push_back({tx, ty});
        }
        const std::uint64_t elem = nn::size_of(opt_.dt);
        const auto* meas = model_.as_measured();
        o.workspace = spec.workspace_values * elem + spec.workspace_f32_values * 4;
        if (spec.variants.empty()) {
            o.cost = cost(o.name, {}, spec.kind, spec.flops, o.inputs, o.outputs);
            if (meas) o.workspace = meas->workspace(o.name);
        }
        for (const auto& v : spec.variants) {
            const std::string vname = v.name();
            if (meas && !meas->has_variant(o.name, vname)) continue; // the measured backend cannot run it
            variant var{vname, 0, v.workspace_values * elem, {}};
            for (auto s : v.inputs) {
                const auto t = find(s);
                if (t == graph::npos)
                    throw error("nn", "layer '" + n.name + "' op '" + o.name + "' variant '" + vname +
                                          "' reads a tensor the op does not list");
                if (std::find(var.inputs.begin(), var.inputs.end(), t) == var.inputs.end()) var.inputs.push_back(t);
            }
            // Reading less moves fewer bytes.
            var.cost = cost(o.name, vname, spec.kind, spec.flops, var.inputs.empty() ? o.inputs : var.inputs, o.outputs,
                            v.time_factor);
            if (meas) var.workspace = meas->workspace(o.name, vname);
            o.variants.push_back(std::move(var));
        }
        if (!spec.variants.empty() && o.variants.empty())
            throw error("nn", "op '" + o.name + "': the measured costs '" + model_.name() + "' have none of its variants");
        if (!o.variants.empty()) {
            o.cost = o.variants.front().cost;
            o.workspace = o.variants.front().workspace;
        }
        add_op(std::move(o));
        record({op_origin_kind::layer, static_cast<std::uint32_t>(i), static_cast<std::uint32_t>(spec_index), backward,
                0, std::move(bound)});
    }

    /// Adds contribution `t` to the gradient `acc` (count `got` of `expected`),
    /// summing in place as contributions arrive.
    void contribute(graph::id_type& acc, std::uint32_t& got, std::uint32_t expected, graph::id_type t,
                    const std::string& base, std::string_view final_suffix, const nn::tensor_info& info) {
        ++got;
        if (acc == graph::npos) {
            acc = t;
            return;
        }
        const std::string k = std::to_string(got);
        const std::string out_name = base + std::string(final_suffix) + (got == expected ? "" : k);
        op o;
        o.name = base + ".grad_acc" + k;
        o.phase = phase::backward;
        o.inputs = {acc, t};
        o.outputs = {new_tensor(out_name, info)};
        o.inplace = {{acc, o.outputs[0]}};
        o.cost = cost(o.name, {}, nn::compute_kind::pointwise, double(info.numel()), o.inputs, o.outputs);
        acc = o.outputs[0];
        add_op(std::move(o));
        record({op_origin_kind::grad_acc, 0, 0, true, 0, {}});
    }

    void emit_update(std::size_t p) {
        const auto& param = net_.parameters()[p];
        const bool master = opt_.master_weights && opt_.dt != nn::dtype::fp32;
        // The state is fp32 beside half-precision weights when a master copy is kept.
        const nn::tensor_info info{param.shape, master ? nn::element::f32 : nn::element::floating};
        op o;
        o.name = param.name + ".update";
        o.phase = phase::update;
        o.inputs = {param_tensor_[p], param_grad_[p]};
        double flops_per_value = 2;
        const bool split = sharded(p);
        auto state = [&](const std::string& name) { return split ? new_shard(name, info) : new_tensor(name, info, true); };
        switch (opt_.opt) {
        case optimizer::sgd: break;
        case optimizer::sgd_momentum:
            o.inputs.push_back(state(param.name + ".momentum"));
            flops_per_value = 4;
            break;
        case optimizer::adam:
        case optimizer::adamw:
            o.inputs.push_back(state(param.name + ".adam_m"));
            o.inputs.push_back(state(param.name + ".adam_v"));
            flops_per_value = opt_.opt == optimizer::adamw ? 14 : 12;
            break;
        }
        if (master) { // the update runs on the master copy and writes the weight back in `dt`
            o.inputs.push_back(state(param.name + ".master"));
            flops_per_value += 2;
        }
        // Reads everything, writes back the weight and the state (not the gradient).
        std::vector<graph::id_type> written(o.inputs.begin(), o.inputs.end());
        written.erase(written.begin() + 1);
        const double values = double(info.numel()) / double(split ? opt_.shard : 1);
        o.cost = cost(o.name, {}, nn::compute_kind::other, flops_per_value * values, o.inputs, written);
        add_op(std::move(o));
        record({op_origin_kind::update, 0, 0, false, static_cast<std::uint32_t>(p), {}});
    }

    const nn::network& net_;
    const training_options& opt_;
    graph g_;
    training_program* program_ = nullptr;
    cost::cost_model model_;
    std::vector<char> produced_; ///< per tensor: an op of the graph wrote it (not persistent)
    std::vector<nn::layer_ops> lowered_;
    std::vector<graph::id_type> act_tensor_, param_tensor_;
    std::vector<std::vector<graph::id_type>> internal_tensor_;
    std::vector<bool> requires_grad_;
    std::vector<std::uint32_t> expected_, expected_param_, got_, got_param_;
    std::vector<graph::id_type> grad_, param_grad_;
    std::vector<graph::id_type> current_grad_in_, current_grad_param_;
    std::vector<graph::id_type> gathered_; ///< per parameter: its full weight in the layer being emitted (sharded)
    std::vector<std::uint32_t> fwd_gathers_, bwd_gathers_; ///< per parameter: gathers so far in each pass
    bool in_backward_ = false;
};

} // namespace detail

/// The training graph of `net`: forward, loss, backward with gradient
/// accumulation, weight gradients and one update per parameter, phases set,
/// costs in microseconds by `opt.cost` (default: the roofline of
/// `opt.device`), `cost_unit` "us". The result passes `validate()`.
/// Throws `memplan::error` when the network has no loss layer output or a
/// layer is inconsistent.
inline graph training_graph(const nn::network& net, const training_options& opt = {}) {
    return detail::training_builder(net, opt).build();
}

/// The same graph as `training_graph(net, opt)`, and in `program` (replaced)
/// the origin of every op and the shape of every tensor, for an engine that
/// runs the graph with real kernels.
inline graph training_graph(const nn::network& net, const training_options& opt, training_program& program) {
    program = {};
    return detail::training_builder(net, opt, &program).build();
}

} // namespace memplan
