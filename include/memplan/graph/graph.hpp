// The computation graph: tensors (byte sizes), ops (inputs, outputs, cost,
// workspace, phase, implementation variants, in-place pairs) and the graph's
// required outputs. The order in which ops are added is the default schedule.
//
// Sizes and ids are template parameters (`basic_graph<Size, Id>`); `graph` is
// the default instantiation used by the I/O layer and the command line.
#pragma once

#include <memplan/core/error.hpp>

#include <concepts>
#include <cstdint>
#include <limits>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <utility>
#include <vector>

namespace memplan {

/// Where an op belongs in a training step. Only forward ops may be recomputed
/// unless a planner option says otherwise.
enum class phase : std::uint8_t { forward, backward, update };

constexpr std::string_view to_string(phase p) noexcept {
    switch (p) {
    case phase::forward: return "forward";
    case phase::backward: return "backward";
    case phase::update: return "update";
    }
    return "forward";
}

constexpr std::optional<phase> parse_phase(std::string_view s) noexcept {
    if (s == "forward") return phase::forward;
    if (s == "backward") return phase::backward;
    if (s == "update") return phase::update;
    return std::nullopt;
}

/// One implementation of an op (a convolution algorithm, a ReLU backward that
/// reads a bit mask, ...). When an op has variants, each executed step picks
/// one. A variant may read only some of the op's inputs (`inputs`, a subset of
/// the op's, as tensor ids): the op lists every tensor any variant may read,
/// so dependencies hold whatever the choice, while liveness keeps only what
/// the chosen variant reads (MONeT's batch-norm backward from its output).
template <class Size = std::uint64_t, class Id = std::uint32_t>
struct basic_variant {
    std::string name;
    double cost = 1.0;
    Size workspace = 0;     ///< scratch bytes needed only while the step runs
    std::vector<Id> inputs{}; ///< tensors this variant reads; empty: all of the op's inputs
};

template <class Size = std::uint64_t>
struct basic_tensor {
    std::string name;
    Size bytes = 0;
    bool persistent = false; ///< live for the whole run (weights, optimizer state)
};

template <class Size = std::uint64_t, class Id = std::uint32_t>
struct basic_op {
    std::string name;
    std::vector<Id> inputs;  ///< tensor ids
    std::vector<Id> outputs; ///< tensor ids
    double cost = 1.0;       ///< run time in the graph's unit; the price of recomputing
    Size workspace = 0;      ///< used when the op has no variants
    memplan::phase phase = phase::forward;
    std::vector<basic_variant<Size, Id>> variants;
    /// (input, output): the output may take over the input's buffer when this
    /// step is the input's last use.
    std::vector<std::pair<Id, Id>> inplace;

    bool has_variants() const noexcept { return !variants.empty(); }
};

/// A graph of tensors and ops. Names are unique within their kind; ids are
/// dense indices in insertion order. Structural rules (single producer,
/// topological listing, no cycle, no overflow) are checked by `validate()`
/// in graph/validate.hpp, not on every insertion, so a reader can report the
/// first offending item by name.
template <class Size = std::uint64_t, class Id = std::uint32_t>
    requires std::unsigned_integral<Size> && std::unsigned_integral<Id>
class basic_graph {
public:
    using size_type = Size;
    using id_type = Id;
    using tensor_type = basic_tensor<Size>;
    using op_type = basic_op<Size, Id>;
    using variant_type = basic_variant<Size, Id>;

    /// Id meaning "none" (no producer, no variant).
    static constexpr Id npos = std::numeric_limits<Id>::max();

    basic_graph() = default;
    explicit basic_graph(std::string name) : name_(std::move(name)) {}

    const std::string& name() const noexcept { return name_; }
    void set_name(std::string name) { name_ = std::move(name); }

    /// The unit of every cost of the graph ("us": microseconds); empty: an
    /// unnamed relative unit. Graphs whose units differ are not compared.
    const std::string& cost_unit() const noexcept { return cost_unit_; }
    /// How the costs were made ("roofline:v100", "fused:h200", "measured:cpu"); may be empty.
    const std::string& cost_model() const noexcept { return cost_model_; }
    void set_costs_from(std::string unit, std::string model) {
        cost_unit_ = std::move(unit);
        cost_model_ = std::move(model);
    }

    /// Adds a tensor; throws when the name is empty or already taken.
    Id add_tensor(std::string name, Size bytes, bool persistent = false) {
        if (name.empty())
            throw error("graph", "tensor #" + std::to_string(tensors_.size()) + " has an empty name");
        if (tensor_ids_.contains(name)) throw error("graph", "tensor '" + name + "' is declared twice");
        const Id id = next_id(tensors_.size(), "tensor", name);
        tensor_ids_.emplace(name, id);
        tensors_.push_back(tensor_type{std::move(name), bytes, persistent});
        return id;
    }

    /// Adds an op; its tensor ids must exist. Throws when the name is empty or
    /// taken, or when an id is out of range.
    Id add_op(op_type op) {
        if (op.name.empty()) throw error("graph", "op #" + std::to_string(ops_.size()) + " has an empty name");
        if (op_ids_.contains(op.name)) throw error("graph", "op '" + op.name + "' is declared twice");
        auto check = [&](Id t, std::string_view role) {
            if (t >= tensors_.size())
                throw error("graph", "op '" + op.name + "' names " + std::string(role) + " tensor id " +
                                         std::to_string(t) + " which does not exist");
        };
        for (Id t : op.inputs) check(t, "input");
        for (Id t : op.outputs) check(t, "output");
        for (auto [a, b] : op.inplace) {
            check(a, "in-place input");
            check(b, "in-place output");
        }
        for (const auto& v : op.variants)
            for (Id t : v.inputs) check(t, "variant '" + v.name + "' input");
        const Id id = next_id(ops_.size(), "op", op.name);
        op_ids_.emplace(op.name, id);
        ops_.push_back(std::move(op));
        return id;
    }

    /// Convenience: adds an op whose inputs and outputs are given by name.
    /// Throws naming the op and the tensor when a name is unknown.
    Id add_op(std::string name, const std::vector<std::string>& inputs, const std::vector<std::string>& outputs,
              double cost = 1.0, Size workspace = 0, memplan::phase ph = phase::forward) {
        op_type op;
        op.name = std::move(name);
        op.cost = cost;
        op.workspace = workspace;
        op.phase = ph;
        for (const auto& t : inputs) op.inputs.push_back(tensor_id_for(op.name, t));
        for (const auto& t : outputs) op.outputs.push_back(tensor_id_for(op.name, t));
        return add_op(std::move(op));
    }

    /// Marks a tensor as a required graph output (live after the last step).
    void add_output(Id tensor) {
        if (tensor >= tensors_.size())
            throw error("graph", "graph output names tensor id " + std::to_string(tensor) + " which does not exist");
        outputs_.push_back(tensor);
    }

    const std::vector<tensor_type>& tensors() const noexcept { return tensors_; }
    const std::vector<op_type>& ops() const noexcept { return ops_; }
    const std::vector<Id>& outputs() const noexcept { return outputs_; }

    const tensor_type& tensor(Id id) const { return tensors_.at(id); }
    const op_type& op(Id id) const { return ops_.at(id); }
    /// Mutable access for costs, variants and sizes. Names and ids must not be
    /// changed through it.
    tensor_type& tensor_at(Id id) { return tensors_.at(id); }
    op_type& op_at(Id id) { return ops_.at(id); }

    std::size_t num_tensors() const noexcept { return tensors_.size(); }
    std::size_t num_ops() const noexcept { return ops_.size(); }

    std::optional<Id> find_tensor(std::string_view name) const {
        if (auto it = tensor_ids_.find(std::string(name)); it != tensor_ids_.end()) return it->second;
        return std::nullopt;
    }
    std::optional<Id> find_op(std::string_view name) const {
        if (auto it = op_ids_.find(std::string(name)); it != op_ids_.end()) return it->second;
        return std::nullopt;
    }

    /// Index of the named variant of op `o`, or nullopt.
    std::optional<Id> find_variant(Id o, std::string_view name) const {
        const auto& vs = op(o).variants;
        for (std::size_t i = 0; i < vs.size(); ++i)
            if (vs[i].name == name) return static_cast<Id>(i);
        return std::nullopt;
    }

    /// Workspace bytes of op `o` run as `variant` (npos: the op's own field).
    Size workspace_of(Id o, Id variant = npos) const {
        const auto& x = op(o);
        if (variant != npos && variant < x.variants.size()) return x.variants[variant].workspace;
        return x.workspace;
    }
    /// Tensors op `o` reads when run as `variant` (npos: all of its inputs).
    const std::vector<Id>& reads_of(Id o, Id variant = npos) const {
        const auto& x = op(o);
        if (variant != npos && variant < x.variants.size() && !x.variants[variant].inputs.empty())
            return x.variants[variant].inputs;
        return x.inputs;
    }
    /// Cost of op `o` run as `variant` (npos: the op's own field).
    double cost_of(Id o, Id variant = npos) const {
        const auto& x = op(o);
        if (variant != npos && variant < x.variants.size()) return x.variants[variant].cost;
        return x.cost;
    }

private:
    Id tensor_id_for(const std::string& op_name, const std::string& tensor_name) const {
        if (auto id = find_tensor(tensor_name)) return *id;
        throw error("graph", "op '" + op_name + "' names tensor '" + tensor_name + "' which is not declared");
    }

    static Id next_id(std::size_t count, std::string_view kind, const std::string& name) {
        if (count >= static_cast<std::size_t>(npos))
            throw error("graph", "too many " + std::string(kind) + "s for the id type at '" + name + "'");
        return static_cast<Id>(count);
    }

    std::string name_;
    std::string cost_unit_, cost_model_;
    std::vector<tensor_type> tensors_;
    std::vector<op_type> ops_;
    std::vector<Id> outputs_;
    std::unordered_map<std::string, Id> tensor_ids_;
    std::unordered_map<std::string, Id> op_ids_;
};

using tensor = basic_tensor<>;
using op = basic_op<>;
using variant = basic_variant<>;
using graph = basic_graph<>;

} // namespace memplan
