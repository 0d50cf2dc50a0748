// Cost models: what an op of a derived training graph costs, as a policy.
//
// The derivation (nn/training.hpp) describes each op's work — its arithmetic,
// the bytes it reads and writes, whether it is point-wise — as an `op_work`
// and asks a cost model for its time in microseconds. Three models:
//
// - `roofline`: max(flops / rate, bytes / bandwidth) of one device, op by op,
//   unfused (cost/device.hpp). What every op costs when each runs as its own
//   kernel that reads its inputs from memory and writes its outputs back.
// - `fused`: the same, except that a point-wise op (element-wise or
//   normalisation) is folded into the kernel of the op that produced its
//   input, as a compiler does (XLA, TorchInductor): the input it takes from
//   its producer is never read back from memory, and its output is written by
//   the fused kernel's epilogue, which the producer already pays for. Such an
//   op costs only its arithmetic and the reads of inputs that no fusible
//   producer hands it (a residual's second operand, a graph input). This is
//   the view under which PyTorch's min-cut partitioner (functorch,
//   `min_cut_rematerialization_partition`) treats point-wise recomputation as
//   nearly free.
// - `measured`: costs measured on the machine that runs the plan (a graph
//   with measured costs, written by a profiling pass: engine/profile.hpp for
//   the CPU backend, memplan_profile_cuda for CUDA), looked up by op and
//   variant name.
//
// A cost model is any type with `op_us(const op_work&)` and `name()`
// (concept `CostModel`); `cost_model` holds one of the three, chosen at run
// time ("roofline:v100", "fused:h200", "measured:<source>"). Every model
// returns microseconds: derived graphs declare `cost_unit` "us".
#pragma once

#include <memplan/core/error.hpp>
#include <memplan/cost/device.hpp>
#include <memplan/graph/graph.hpp>

#include <algorithm>
#include <concepts>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <utility>
#include <variant>

namespace memplan::cost {

/// The unit of every cost a cost model returns and of derived graphs.
inline constexpr std::string_view microseconds = "us";

/// What one op (or one variant of it) does, as the derivation sees it.
struct op_work {
    std::string_view op;      ///< graph op name ("conv1.fwd", "fc.w.update", ...)
    std::string_view variant; ///< graph variant name; empty: the op itself (no variants)
    compute_kind kind = compute_kind::other;
    double flops = 0;
    double bytes_read = 0;
    double bytes_written = 0;
    /// Of `bytes_read`, the bytes of inputs produced by another op of the
    /// graph (not graph inputs or persistent tensors): what a point-wise op
    /// takes from its producer's registers when it is fused into it.
    double producer_bytes = 0;
    double time_factor = 1.0; ///< the variant's time relative to the op's own roofline (Winograd 0.55, ...)
    /// The precision its matrix products run in (the narrowest floating
    /// operand; the training dtype for derived graphs): picks the matrix rate.
    precision matmul_precision = precision::fp32;
};

/// A cost model: the time of an op in microseconds, and its name as graphs record it.
template <class M>
concept CostModel = requires(const M& m, const op_work& w) {
    { m.op_us(w) } -> std::convertible_to<double>;
    { m.name() } -> std::convertible_to<std::string>;
};

/// Op by op, unfused: max(flops / rate, bytes moved / bandwidth) on `device`,
/// matrix products at the rate of their precision.
struct roofline {
    device_profile device = v100;

    double op_us(const op_work& w) const {
        return roofline_us(device, w.kind, w.flops, w.bytes_read + w.bytes_written, w.matmul_precision) *
               w.time_factor;
    }
    std::string name() const { return "roofline:" + std::string(device.name); }
};

/// Point-wise ops folded into their producer: they cost their arithmetic and
/// the reads no producer hands them; every other op as `roofline`.
struct fused {
    device_profile device = v100;

    double op_us(const op_work& w) const {
        if (w.kind != compute_kind::pointwise) return roofline{device}.op_us(w);
        const double unfused_reads = std::max(0.0, w.bytes_read - w.producer_bytes);
        return roofline_us(device, w.kind, w.flops, unfused_reads) * w.time_factor;
    }
    std::string name() const { return "fused:" + std::string(device.name); }
};

/// Costs measured on a machine: op and variant costs (and workspaces) of a
/// graph whose costs are measured microseconds, looked up by name. Throws
/// memplan::error naming the op (or variant) the measurement lacks: mixing
/// measured and modelled costs would mislead the planners.
class measured {
public:
    /// `g`'s `cost_unit` must be "us". `source` names the measurement in
    /// messages and in the cost model's name (default: the graph's
    /// `cost_model`, e.g. "measured:cpu").
    explicit measured(graph g, std::string source = {}) : g_(std::move(g)), source_(std::move(source)) {
        if (g_.cost_unit() != microseconds)
            throw error("cost", "measured costs '" + g_.name() + "' are in unit '" +
                                    (g_.cost_unit().empty() ? std::string("(none)") : g_.cost_unit()) +
                                    "', not microseconds ('us'): profile the graph again or convert it");
        if (source_.empty()) source_ = g_.cost_model().empty() ? "measured:" + g_.name() : g_.cost_model();
        if (source_.rfind("measured", 0) != 0) source_ = "measured:" + source_;
    }

    double op_us(const op_work& w) const {
        const auto& o = find(w.op);
        if (w.variant.empty()) return o.cost;
        return find_variant(o, w.variant).cost;
    }
    /// The measured workspace of an op or variant (what the backend asked for).
    std::uint64_t workspace(std::string_view op, std::string_view variant = {}) const {
        const auto& o = find(op);
        return variant.empty() ? o.workspace : find_variant(o, variant).workspace;
    }
    /// Whether the measurement has variant `variant` of op `op` (a backend may not support every variant).
    bool has_variant(std::string_view op, std::string_view variant) const {
        const auto& o = find(op);
        return std::any_of(o.variants.begin(), o.variants.end(), [&](const auto& v) { return v.name == variant; });
    }
    std::string name() const { return source_; }
    const graph& costs() const noexcept { return g_; }

private:
    const graph::op_type& find(std::string_view op) const {
        const auto id = g_.find_op(op);
        if (!id) throw error("cost", "the measured costs '" + source_ + "' have no op '" + std::string(op) + "'");
        return g_.op(*id);
    }
    const graph::variant_type& find_variant(const graph::op_type& o, std::string_view variant) const {
        for (const auto& v : o.variants)
            if (v.name == variant) return v;
        throw error("cost", "the measured costs '" + source_ + "' have no variant '" + std::string(variant) +
                                "' of op '" + o.name + "'");
    }

    graph g_;
    std::string source_;
};

static_assert(CostModel<roofline> && CostModel<fused> && CostModel<measured>);

/// One of the cost models, chosen at run time.
class cost_model {
public:
    cost_model() = default;
    template <class M>
        requires CostModel<M> && (!std::same_as<std::remove_cvref_t<M>, cost_model>)
    cost_model(M m) : m_(std::move(m)) {} // NOLINT: implicit, a model is a cost_model

    double op_us(const op_work& w) const {
        return std::visit([&](const auto& m) { return m.op_us(w); }, m_);
    }
    std::string name() const {
        return std::visit([](const auto& m) { return m.name(); }, m_);
    }
    /// The measured model, when this is one.
    const measured* as_measured() const noexcept { return std::get_if<measured>(&m_); }

private:
    std::variant<roofline, fused, measured> m_{roofline{}};
};

static_assert(CostModel<cost_model>);

/// Throws when graphs `a` and `b` declare different cost units (naming both):
/// their costs cannot be compared, merged or planned together. Graphs
/// without a declared unit count as one unnamed relative unit.
template <class Size, class Id>
void require_same_cost_unit(const basic_graph<Size, Id>& a, const basic_graph<Size, Id>& b) {
    if (a.cost_unit() == b.cost_unit()) return;
    auto unit = [](const std::string& u) { return u.empty() ? std::string("no declared unit") : "'" + u + "'"; };
    throw error("cost", "graph '" + a.name() + "' has costs in " + unit(a.cost_unit()) + " and graph '" + b.name() +
                            "' in " + unit(b.cost_unit()) + ": costs in different units cannot be compared");
}

} // namespace memplan::cost
