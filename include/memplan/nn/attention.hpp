// Multi-head scaled dot-product attention, as the matmul and softmax ops a
// framework runs without a fused kernel:
//   scores = Q K^T / sqrt(d_head)   (N, heads, S_q, S_k)
//   probs  = softmax(scores)        (in place over the scores)
//   [dropped = dropout(probs)]      (keeps a byte mask; probs stay for softmax backward)
//   out    = probs V                (N, S_q, D), heads merged by strided GEMMs
// The (S_q x S_k) tensors per head are what makes attention memory-hungry.
// Inputs are Q, K, V, each (N, S, D), or one packed (N, S, 3D) tensor (GPT-2's
// c_attn); with a packed input the gradients of V are staged in a private
// tensor and packed with those of Q and K by the last backward op.
//
// `flash_attention` is the fused kernel (Dao et al. 2022, FlashAttention-2
// 2023): one forward op that keeps only its output and the log-sum-exp of
// each query row (fp32), and one backward op that recomputes the
// probabilities block by block. No (S_q x S_k) tensor exists. Grouped-query
// attention (Ainslie et al. 2023) shares each key/value head among
// heads / kv_heads query heads. The backward's scratch is modelled as
// FlashAttention-2's: an fp32 accumulator for dQ and the fp32 row sums
// D = rowsum(dO * O), plus, under grouped-query attention, dK and dV
// expanded to every query head before they are summed per group.
#pragma once

#include <memplan/nn/op_spec.hpp>
#include <memplan/nn/shape.hpp>

#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace memplan::nn {

struct attention {
    static constexpr std::string_view kind = "attention";
    std::uint64_t heads = 1;
    bool causal = false; ///< mask future positions (decoders); does not change memory
    double dropout = 0;  ///< dropout on the attention probabilities

    tensor_info infer(std::span<const tensor_info> in, std::string_view name) const {
        if (in.size() != 1 && in.size() != 3)
            shape_error(name, kind, "takes 3 inputs (Q, K, V) or 1 packed input, got " + std::to_string(in.size()));
        for (std::size_t i = 0; i < in.size(); ++i) detail::expect_floating(in[i], i, 3, "(N, S, D)", name, kind);
        if (heads == 0) shape_error(name, kind, "needs at least one head");
        if (!(dropout >= 0 && dropout < 1)) shape_error(name, kind, "dropout must be in [0, 1)");
        const auto& q = in[0].shape;
        std::uint64_t d = q[2];
        if (in.size() == 1) {
            if (d % 3) shape_error(name, kind, "packed input shape " + q.to_string() + " is not (N, S, 3D)");
            d /= 3;
        } else {
            const auto& k = in[1].shape;
            const auto& v = in[2].shape;
            if (k[0] != q[0] || k[2] != q[2] || v != k)
                shape_error(name, kind, "Q " + q.to_string() + ", K " + k.to_string() + " and V " + v.to_string() +
                                            " do not fit (N, S_q, D), (N, S_k, D), (N, S_k, D)");
        }
        if (d % heads)
            shape_error(name, kind, "width " + std::to_string(d) + " is not divisible by " + std::to_string(heads) +
                                        " heads");
        return {shape{q[0], q[1], d}, element::floating};
    }

    std::vector<param_spec> params(std::span<const tensor_info>) const { return {}; }

    layer_ops lower(const lower_context& c) const {
        const bool packed = c.inputs.size() == 1;
        const auto& y = c.output.shape;
        const std::uint64_t n = y[0], sq = y[1], d = y[2];
        const std::uint64_t sk = packed ? sq : c.inputs[1].shape[1];
        const shape scores{n, heads, sq, sk};
        const double per_score = double(scores.numel());
        const double mm = 2.0 * per_score * double(d / heads); // one of the two products
        const bool drop = dropout > 0;

        layer_ops ops;
        auto internal = [&](std::string suffix, tensor_info info) {
            ops.internals.push_back({std::move(suffix), std::move(info)});
            return slot::internal(static_cast<std::uint32_t>(ops.internals.size() - 1));
        };
        const slot s_scores = internal("scores", {scores, element::floating});
        const slot s_probs = internal("probs", {scores, element::floating});
        const slot s_mask = drop ? internal("drop_mask", {scores, element::u8}) : slot{};
        const slot s_dropped = drop ? internal("dropped", {scores, element::floating}) : slot{};
        const slot s_dattn = internal(drop ? "d_dropped" : "d_probs", {scores, element::floating});
        const slot s_dprobs = drop ? internal("d_probs", {scores, element::floating}) : s_dattn;
        const slot s_dscores = internal("d_scores", {scores, element::floating});
        const slot s_dv = packed ? internal("d_v", {y, element::floating}) : slot::grad_input(2);
        const slot s_used = drop ? s_dropped : s_probs;
        const std::vector<slot> qk = packed ? std::vector<slot>{slot::input(0)}
                                            : std::vector<slot>{slot::input(0), slot::input(1)};
        const slot v_in = packed ? slot::input(0) : slot::input(2);

        ops.forward.push_back({op_pass::scores, phase::forward, compute_kind::matmul, qk, {s_scores}, mm + per_score, 0, {}, {}});
        ops.forward.push_back({op_pass::softmax, phase::forward, compute_kind::other, {s_scores}, {s_probs}, 5 * per_score, 0,
                               {}, {{s_scores, s_probs}}});
        if (drop)
            ops.forward.push_back({op_pass::dropout, phase::forward, compute_kind::other, {s_probs}, {s_dropped, s_mask},
                                   2 * per_score, 0, {}, {}});
        ops.forward.push_back({op_pass::context, phase::forward, compute_kind::matmul, {s_used, v_in}, {slot::output()}, mm, 0,
                               {}, {}});

        ops.backward.push_back({op_pass::context_bwd, phase::backward, compute_kind::matmul,
                                {slot::grad_output(), s_used, v_in}, {s_dattn, s_dv}, 2 * mm, 0, {}, {}});
        if (drop)
            ops.backward.push_back({op_pass::dropout_bwd, phase::backward, compute_kind::other, {s_mask, s_dattn}, {s_dprobs},
                                    per_score, 0, {}, {{s_dattn, s_dprobs}}});
        ops.backward.push_back({op_pass::softmax_bwd, phase::backward, compute_kind::other, {s_probs, s_dprobs}, {s_dscores},
                                3 * per_score, 0, {}, {{s_dprobs, s_dscores}}});
        op_spec qk_bwd{op_pass::scores_bwd, phase::backward, compute_kind::matmul, {s_dscores}, {}, 2 * mm + per_score, 0, {}, {}};
        qk_bwd.inputs.insert(qk_bwd.inputs.end(), qk.begin(), qk.end());
        if (packed) {
            qk_bwd.inputs.push_back(s_dv);
            qk_bwd.outputs = {slot::grad_input(0)};
        } else {
            qk_bwd.outputs = {slot::grad_input(0), slot::grad_input(1)};
        }
        ops.backward.push_back(std::move(qk_bwd));
        return ops;
    }
};

/// Fused attention: Q (N, S_q, heads * d), K and V (N, S_k, kv_heads * d)
/// -> (N, S_q, heads * d).
struct flash_attention {
    static constexpr std::string_view kind = "flash_attention";
    std::uint64_t heads = 1;
    std::uint64_t kv_heads = 0; ///< key/value heads; 0: as many as `heads`
    bool causal = false;        ///< mask future positions; the kernel skips masked blocks (half the work)

    std::uint64_t key_heads() const noexcept { return kv_heads ? kv_heads : heads; }

    tensor_info infer(std::span<const tensor_info> in, std::string_view name) const {
        if (in.size() != 3) shape_error(name, kind, "takes 3 inputs (Q, K, V), got " + std::to_string(in.size()));
        for (std::size_t i = 0; i < in.size(); ++i) detail::expect_floating(in[i], i, 3, "(N, S, D)", name, kind);
        if (heads == 0) shape_error(name, kind, "needs at least one head");
        if (heads % key_heads())
            shape_error(name, kind, std::to_string(heads) + " query heads do not share " +
                                        std::to_string(key_heads()) + " key/value heads evenly");
        const auto& q = in[0].shape;
        const auto& k = in[1].shape;
        const auto& v = in[2].shape;
        if (q[2] % heads)
            shape_error(name, kind, "Q width " + std::to_string(q[2]) + " is not divisible by " +
                                        std::to_string(heads) + " heads");
        const std::uint64_t d = q[2] / heads;
        if (k[0] != q[0] || k[2] != key_heads() * d || v != k)
            shape_error(name, kind, "Q " + q.to_string() + ", K " + k.to_string() + " and V " + v.to_string() +
                                        " do not fit (N, S_q, heads * d), (N, S_k, kv_heads * d) twice with " +
                                        std::to_string(heads) + " heads and " + std::to_string(key_heads()) +
                                        " key/value heads");
        return in[0];
    }

    std::vector<param_spec> params(std::span<const tensor_info>) const { return {}; }

    layer_ops lower(const lower_context& c) const {
        const auto& y = c.output.shape;
        const std::uint64_t n = y[0], sq = y[1], width = y[2], sk = c.inputs[1].shape[1];
        const double scores = double(n) * double(heads) * double(sq) * double(sk) * (causal ? 0.5 : 1.0);
        const double mm = 2.0 * scores * double(width / heads); // one of the two products
        layer_ops ops;
        ops.internals.push_back({"lse", {shape{n, heads, sq}, element::f32}});
        ops.forward.push_back({op_pass::fwd, phase::forward, compute_kind::matmul,
                               {slot::input(0), slot::input(1), slot::input(2)}, {slot::output(), slot::internal(0)},
                               2 * mm + 5 * scores, 0, {}, {}});
        // Recomputes Q K^T, then dV, dP, dQ and dK: five products.
        op_spec bwd{op_pass::bwd, phase::backward, compute_kind::matmul,
                    {slot::grad_output(), slot::input(0), slot::input(1), slot::input(2), slot::output(),
                     slot::internal(0)},
                    {slot::grad_input(0), slot::grad_input(1), slot::grad_input(2)}, 5 * mm + 8 * scores, 0, {}, {}};
        bwd.workspace_f32_values = n * sq * width + n * heads * sq;
        if (key_heads() != heads) bwd.workspace_values = 2 * n * sk * width;
        ops.backward.push_back(std::move(bwd));
        return ops;
    }
};

} // namespace memplan::nn
