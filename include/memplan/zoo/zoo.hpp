// The model zoo: published architectures as forward networks and training
// graphs, by name, with batch size, image size and sequence length as
// parameters. CNN defaults are MONeT's (ICLR 2021) settings: ResNet-50 at
// batch 184, GoogLeNet 320, U-Net 11 at 416x608, MobileNet-V2 272, VGG-16
// 176, 224x224 images otherwise; ResNet-18 uses 256, BERT-base 16 x 512
// tokens, GPT-2 small 8 x 1024 tokens. `llama` is a decoder whose sizes are
// options (zoo/llama.hpp), by default Llama-3-8B on 1 x 4096 tokens, trained
// as it is in practice: bf16 weights, activations and gradients, AdamW, and
// fp32 master weights and moments (16 bytes per parameter). Pure bf16
// (master_weights = false, 8 bytes per parameter) is an option; it is not the
// default because bf16's 8-bit mantissa loses updates smaller than 1/256 of a
// weight, which is why Megatron-Core and torchtitan keep fp32 copies.
// The other models default to fp32 and SGD with momentum.
#pragma once

#include <memplan/core/error.hpp>
#include <memplan/nn/training.hpp>
#include <memplan/nn/network.hpp>
#include <memplan/zoo/bert.hpp>
#include <memplan/zoo/googlenet.hpp>
#include <memplan/zoo/gpt2.hpp>
#include <memplan/zoo/llama.hpp>
#include <memplan/zoo/mobilenet_v2.hpp>
#include <memplan/zoo/resnet.hpp>
#include <memplan/zoo/unet.hpp>
#include <memplan/zoo/vgg.hpp>

#include <array>
#include <optional>
#include <cstdint>
#include <span>
#include <string>
#include <string_view>

namespace memplan {

struct zoo_options {
    std::size_t batch = 0;              ///< 0: the model's default
    std::size_t height = 0, width = 0;  ///< image size (CNNs); 0: the model's default
    std::size_t seq = 0;                ///< sequence length (transformers); 0: the model's default
    std::optional<optimizer> opt;       ///< empty: the model's default
    std::optional<nn::dtype> dt;        ///< empty: the model's default
    std::optional<bool> master_weights; ///< fp32 master copies beside half-precision weights; empty: the model's default
    std::size_t shard = 1;              ///< ranks the trained state is sharded over (training_options::shard)
    std::string preset;                 ///< llama: the preset (empty: llama3-8b)
    zoo::llama_config llama;            ///< llama: sizes that override the preset's (0: the preset's)
    nn::device_profile device = nn::v100; ///< the roofline's device when `cost` is empty
    std::optional<cost::cost_model> cost; ///< how ops are priced (cost/model.hpp); empty: roofline on `device`
};

/// A model's defaults; `seq` is 0 for CNNs, `height`/`width` 0 for transformers.
struct zoo_defaults {
    std::string_view name;
    std::size_t batch = 0;
    std::size_t height = 0, width = 0;
    std::size_t seq = 0;
    optimizer opt = optimizer::sgd_momentum;
    nn::dtype dt = nn::dtype::fp32;
    bool master_weights = false;
};

namespace detail {
inline constexpr std::array<zoo_defaults, 9> zoo_table{{
    {"resnet18", 256, 224, 224, 0},
    {"resnet50", 184, 224, 224, 0},
    {"vgg16", 176, 224, 224, 0},
    {"mobilenet_v2", 272, 224, 224, 0},
    {"unet", 11, 416, 608, 0},
    {"googlenet", 320, 224, 224, 0},
    {"bert_base", 16, 0, 0, 512},
    {"gpt2", 8, 0, 0, 1024},
    {"llama", 1, 0, 0, 4096, optimizer::adamw, nn::dtype::bf16, true},
}};
inline constexpr std::array<std::string_view, 9> zoo_name_list{"resnet18",  "resnet50",  "vgg16", "mobilenet_v2", "unet",
                                                               "googlenet", "bert_base", "gpt2",  "llama"};
} // namespace detail

/// Names of the zoo's models, in a fixed order.
inline std::span<const std::string_view> zoo_names() noexcept { return detail::zoo_name_list; }

/// Defaults of model `name`. Throws memplan::error("zoo", ...) for an unknown name.
inline const zoo_defaults& zoo_default(std::string_view name) {
    for (const auto& d : detail::zoo_table)
        if (d.name == name) return d;
    std::string all;
    for (auto n : zoo_names()) all += (all.empty() ? "" : ", ") + std::string(n);
    throw error("zoo", "unknown model '" + std::string(name) + "'; expected one of " + all);
}

/// The options with every 0 replaced by model `name`'s default.
inline zoo_options resolve_zoo_options(std::string_view name, zoo_options o) {
    const auto& d = zoo_default(name);
    if (o.batch == 0) o.batch = d.batch;
    if (o.height == 0) o.height = d.height;
    if (o.width == 0) o.width = d.width;
    if (o.seq == 0) o.seq = d.seq;
    if (!o.opt) o.opt = d.opt;
    if (!o.dt) o.dt = d.dt;
    if (!o.master_weights) o.master_weights = d.master_weights;
    if (name == "llama" && o.preset.empty()) o.preset = "llama3-8b";
    if (name != "llama" && (!o.preset.empty() || o.llama.layers || o.llama.hidden || o.llama.heads ||
                            o.llama.kv_heads || o.llama.ffn || o.llama.vocab || o.llama.tied))
        throw error("zoo", "model '" + std::string(name) + "' takes no decoder sizes or preset (those are llama's)");
    return o;
}

/// The forward network of model `name`. Throws memplan::error for an unknown
/// name ("zoo") or a size the model cannot take ("zoo" / "nn").
inline nn::network zoo_network(std::string_view name, const zoo_options& options = {}) {
    const zoo_options o = resolve_zoo_options(name, options);
    if (name == "resnet18") return zoo::resnet(18, o.batch, o.height, o.width);
    if (name == "resnet50") return zoo::resnet(50, o.batch, o.height, o.width);
    if (name == "vgg16") return zoo::vgg16(o.batch, o.height, o.width);
    if (name == "mobilenet_v2") return zoo::mobilenet_v2(o.batch, o.height, o.width);
    if (name == "unet") return zoo::unet(o.batch, o.height, o.width);
    if (name == "googlenet") return zoo::googlenet(o.batch, o.height, o.width);
    if (name == "bert_base") return zoo::bert_base(o.batch, o.seq);
    if (name == "llama") return zoo::llama(zoo::resolve_llama(o.preset, o.llama), o.batch, o.seq);
    return zoo::gpt2_small(o.batch, o.seq); // zoo_default() has rejected unknown names
}

/// The training graph of model `name`, named "<model>-train-b<batch>"
/// ("llama-<layers>L<hidden>-train-b<batch>-s<seq>" for the decoder).
inline graph zoo_graph(std::string_view name, const zoo_options& options = {}) {
    const zoo_options o = resolve_zoo_options(name, options);
    training_options t;
    t.opt = *o.opt;
    t.dt = *o.dt;
    t.master_weights = *o.master_weights;
    t.shard = o.shard;
    t.device = o.device;
    t.cost = o.cost;
    t.name = std::string(name) + "-train-b" + std::to_string(o.batch);
    if (name == "llama") {
        const auto c = zoo::resolve_llama(o.preset, o.llama);
        t.name = "llama-" + std::to_string(c.layers) + "L" + std::to_string(c.hidden) + "-train-b" +
                 std::to_string(o.batch) + "-s" + std::to_string(o.seq);
    }
    if (o.shard > 1) t.name += "-shard" + std::to_string(o.shard);
    return training_graph(zoo_network(name, o), t);
}

} // namespace memplan
