// memplan zoo: builds the training graph of a zoo model (forward, loss, backward, optimizer update).
#include "common.hpp"

#include <memplan/io/cost_model.hpp>
#include <memplan/io/graph_json.hpp>
#include <memplan/plan/bounds.hpp>
#include <memplan/zoo/random_layered.hpp>
#include <memplan/zoo/zoo.hpp>

#include <array>
#ifdef MEMPLAN_HAS_CPU_ENGINE
#include <memplan/engine/cpu/device.hpp>
#endif

namespace memplan::cli {

namespace {

/// The `cpu` device of `roofline:cpu` / `fused:cpu`: this machine, measured
/// with the CPU engine's kernels when it is built with them.
memplan::cost::device_lookup cpu_device_lookup() {
#ifdef MEMPLAN_HAS_CPU_ENGINE
    return [](std::string_view name) -> std::optional<memplan::cost::device_profile> {
        if (name == "cpu") return memplan::engine::cpu::cpu_device();
        return std::nullopt;
    };
#else
    return {};
#endif
}

/// Bytes of the graph's persistent tensors (weights, optimizer state).
std::uint64_t persistent_bytes(const memplan::graph& g) {
    std::uint64_t sum = 0;
    for (const auto& t : g.tensors())
        if (t.persistent) sum += t.bytes;
    return sum;
}

int run_zoo(const command& c, const std::vector<std::string>& args) {
    const auto a = parse_or_help(c, args,
                                 {{{"--output", "-o"}, true}, {{"--list"}, false}, {{"--batch"}, true},
                                  {{"--image"}, true}, {{"--seq"}, true}, {{"--optimizer"}, true},
                                  {{"--dtype"}, true}, {{"--device"}, true}, {{"--cost"}, true},
                                  {{"--nodes"}, true}, {{"--seed"}, true}, {{"--preset"}, true},
                                  {{"--layers"}, true}, {{"--hidden"}, true}, {{"--heads"}, true},
                                  {{"--kv-heads"}, true}, {{"--ffn"}, true}, {{"--vocab"}, true},
                                  {{"--tied"}, false}, {{"--untied"}, false}, {{"--precision"}, true},
                                  {{"--shard"}, true}});
    if (!a) return exit_ok;
    if (a->has("--list")) {
        a->expect_positional(0, 0, "no model with --list");
        memplan::cli::text_table t;
        t.add_row({"model", "batch", "input"});
        for (auto name : memplan::zoo_names()) {
            const auto& d = memplan::zoo_default(name);
            t.add_row({std::string(name), std::to_string(d.batch),
                       d.seq ? "seq " + std::to_string(d.seq)
                             : std::to_string(d.height) + "x" + std::to_string(d.width)});
        }
        t.add_row({"random_layered", "-", "--nodes N --seed S"});
        std::cout << t.str() << "\nllama presets (--preset NAME; llama3-8b by default):\n";
        memplan::cli::text_table p;
        p.add_row({"preset", "layers", "hidden", "heads", "kv-heads", "ffn", "vocab", "embeddings", "from"});
        for (const auto& x : memplan::zoo::llama_presets()) {
            const auto& k = x.config;
            p.add_row({std::string(x.name), std::to_string(k.layers), std::to_string(k.hidden),
                       std::to_string(k.heads), std::to_string(k.kv_heads), std::to_string(k.ffn),
                       std::to_string(k.vocab), k.tied.value_or(false) ? "tied" : "untied", std::string(x.source)});
        }
        std::cout << p.str();
        return exit_ok;
    }
    a->expect_positional(1, 1, "NAME");
    const std::string name = a->positional[0];
    if (name == "random_layered") { // a forward-only DAG (zoo/random_layered.hpp), no network behind it
        for (auto opt : {"--batch", "--image", "--seq", "--optimizer", "--dtype", "--device", "--cost", "--shard"})
            if (a->has(opt))
                throw memplan::error("cli", std::string("option ") + opt + " does not apply to random_layered");
        const auto nodes = static_cast<std::size_t>(a->integer_or("--nodes", 100, 2));
        const auto seed = static_cast<std::uint64_t>(a->integer_or("--seed", 1, 0));
        const auto g = memplan::random_layered_dag(nodes, seed);
        if (const auto out = a->value("--output")) memplan::write_graph_json(*out, g);
        std::cout << "graph:                 " << g.name() << " (" << g.num_tensors() << " tensors, " << g.num_ops()
                  << " ops, forward only)\n"
                  << "LB, listed order:      "
                  << bytes_both(memplan::schedule_lower_bound(g, memplan::default_schedule(g))) << "\n"
                  << "LB, schedule-free:     " << bytes_both(memplan::schedule_free_lower_bound(g)) << "\n"
                  << "costs:                 relative units (total "
                  << memplan::schedule_cost(g, memplan::default_schedule(g)) << ")\n";
        if (const auto out = a->value("--output")) std::cout << "wrote " << *out << "\n";
        return exit_ok;
    }
    if (a->has("--nodes") || a->has("--seed"))
        throw memplan::error("cli", "options --nodes and --seed are for random_layered only");
    memplan::zoo_default(name); // rejects unknown names with the list
    memplan::zoo_options o;
    static constexpr std::array<const char*, 10> decoder_options{"--preset", "--layers", "--hidden", "--heads",
                                                                 "--kv-heads", "--ffn",  "--vocab",  "--tied",
                                                                 "--untied",  "--precision"};
    if (name != "llama") {
        for (auto opt : decoder_options)
            if (a->has(opt)) throw memplan::error("cli", std::string("option ") + opt + " is for llama only");
    } else {
        if (a->has("--image")) throw memplan::error("cli", "option --image does not apply to llama");
        o.preset = a->value_or("--preset", "llama3-8b");
        o.llama.layers = a->integer_or("--layers", 0, 1);
        o.llama.hidden = a->integer_or("--hidden", 0, 1);
        o.llama.heads = a->integer_or("--heads", 0, 1);
        o.llama.kv_heads = a->integer_or("--kv-heads", 0, 1);
        o.llama.ffn = a->integer_or("--ffn", 0, 1);
        o.llama.vocab = a->integer_or("--vocab", 0, 1);
        if (a->has("--tied") && a->has("--untied")) throw memplan::error("cli", "give --tied or --untied, not both");
        if (a->has("--tied")) o.llama.tied = true;
        if (a->has("--untied")) o.llama.tied = false;
        if (const auto v = a->value("--precision")) {
            if (*v != "mixed" && *v != "pure")
                throw memplan::error("cli", "--precision expects mixed or pure, got '" + *v + "'");
            o.master_weights = *v == "mixed";
        }
    }
    o.shard = static_cast<std::size_t>(a->integer_or("--shard", 1, 1));
    o.batch = static_cast<std::size_t>(a->integer_or("--batch", 0, 1));
    o.seq = static_cast<std::size_t>(a->integer_or("--seq", 0, 1));
    if (const auto image = a->value("--image")) {
        const auto x = image->find('x');
        auto number = [&](std::string_view s) {
            if (s.empty() || s.size() > 6 || s.find_first_not_of("0123456789") != std::string_view::npos || s == "0")
                throw memplan::error("cli", "--image expects HxW with positive integers, got '" + *image + "'");
            return static_cast<std::size_t>(std::stoul(std::string(s)));
        };
        if (x == std::string::npos)
            throw memplan::error("cli", "--image expects HxW with positive integers, got '" + *image + "'");
        o.height = number(std::string_view(*image).substr(0, x));
        o.width = number(std::string_view(*image).substr(x + 1));
    }
    if (const auto v = a->value("--optimizer")) {
        const auto opt = memplan::parse_optimizer(*v);
        if (!opt) throw memplan::error("cli", "--optimizer expects sgd, adam or adamw, got '" + *v + "'");
        o.opt = *opt;
    }
    if (const auto v = a->value("--dtype")) {
        const auto dt = memplan::nn::parse_dtype(*v);
        if (!dt) throw memplan::error("cli", "--dtype expects fp32, fp16 or bf16, got '" + *v + "'");
        o.dt = *dt;
    }
    if (const auto v = a->value("--device")) {
        const auto dev = memplan::nn::find_device(*v);
        if (!dev) throw memplan::error("cli", "--device expects v100, h100 or h200, got '" + *v + "'");
        o.device = *dev;
    }
    if (const auto v = a->value("--cost")) {
        if (a->has("--device")) throw memplan::error("cli", "--cost and --device both set the cost model; give one");
        o.cost = memplan::cost::make_cost_model(*v, cpu_device_lookup());
    }
    const auto t0 = std::chrono::steady_clock::now();
    const auto net = memplan::zoo_network(name, o);
    const auto g = memplan::zoo_graph(name, o);
    const auto resolved = memplan::resolve_zoo_options(name, o);
    const double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    const auto lb = memplan::schedule_lower_bound(g, memplan::default_schedule(g));
    if (const auto out = a->value("--output")) memplan::write_graph_json(*out, g);
    std::cout << "graph:                 " << g.name() << " (" << g.num_tensors() << " tensors, " << g.num_ops()
              << " ops)\n"
              << "parameters:            " << memplan::nn::parameter_count(net) << "\n"
              << "training:              " << memplan::nn::to_string(*resolved.dt) << ", "
              << memplan::to_string(*resolved.opt)
              << (*resolved.master_weights && *resolved.dt != memplan::nn::dtype::fp32
                      ? ", fp32 master weights and optimizer state"
                      : "")
              << (o.shard > 1 ? ", one of " + std::to_string(o.shard) + " ranks (weights, gradients and optimizer "
                                "state sharded)"
                              : "")
              << "\n"
              << "persistent:            " << bytes_both(persistent_bytes(g)) << " (weights, optimizer state)\n"
              << "LB, default schedule:  " << bytes_both(lb) << "\n"
              << "LB, schedule-free:     " << bytes_both(memplan::schedule_free_lower_bound(g)) << "\n"
              << "costs:                 " << g.cost_model() << " (total "
              << memplan::schedule_cost(g, memplan::default_schedule(g)) << " us, default variants)\n"
              << "built in:              " << memplan::cli::human_seconds(secs) << "\n";
    if (const auto out = a->value("--output")) std::cout << "wrote " << *out << "\n";
    return exit_ok;
}

} // namespace

const command zoo_command{
    "zoo", "memplan zoo NAME [--batch N] [--image HxW] [--seq N] [--optimizer sgd|adam|adamw] [--dtype fp32|fp16|bf16]\n"
       "           [--shard N] [--cost MODEL] [-o GRAPH.json]\n"
       "           |  memplan zoo llama [--preset NAME] [--layers L] [--hidden H] [--heads A] [--kv-heads K] [--ffn F]\n"
       "                [--vocab V] [--tied|--untied] [--precision mixed|pure] [--batch N] [--seq N] ...\n"
       "           |  memplan zoo random_layered [--nodes N] [--seed S] [-o GRAPH.json]  |  memplan zoo --list",
    "Builds the training graph of a zoo model (forward, loss, backward, optimizer update), or a random layered\n"
    "DAG without a backward part (Moccasin's benchmark family; docs/remat.md describes the generator).",
    "  --batch N            batch size (default: the model's; MONeT's settings for the CNNs)\n"
    "  --image HxW          input image size (CNNs)\n"
    "  --seq N              sequence length (transformers)\n"
    "  --optimizer NAME     sgd (with momentum; the default but for llama), adam, adamw (llama's default)\n"
    "  --dtype NAME         fp32 (the default but for llama), fp16, bf16 (llama's default)\n"
    "  --preset NAME        llama: llama3-8b (default), llama3-70b, llama3.2-1b, tiny (--list shows them);\n"
    "                       --layers, --hidden, --heads, --kv-heads, --ffn, --vocab, --tied/--untied override it\n"
    "  --precision NAME     llama with fp16/bf16: mixed (default: fp32 master weights and optimizer state,\n"
    "                       16 bytes per parameter with AdamW) or pure (all state in --dtype, 8 bytes)\n"
    "  --shard N            fully sharded data parallelism (ZeRO-3, FSDP) over N ranks: the graph is one\n"
    "                       rank's step; weights, gradients and optimizer state split N ways, each layer\n"
    "                       gathering its full weights for its forward and its backward (default 1: none)\n"
    "  --cost MODEL         how ops are priced, in microseconds: roofline:DEVICE (default roofline:v100),\n"
    "                       fused:DEVICE (point-wise ops folded into their producer), measured:FILE (a graph\n"
    "                       with measured costs, from train_X --profile); DEVICE: v100, h100, h200, cpu (this\n"
    "                       machine, measured now)\n"
    "  --device NAME        the same as --cost roofline:NAME\n"
    "  -o, --output FILE    write the graph (memplan.graph JSON)\n"
    "  --nodes N, --seed S  random_layered: ops (default 100, at least 2) and seed (default 1)\n"
    "  --list               list the models and their defaults\n",
    run_zoo};

} // namespace memplan::cli
