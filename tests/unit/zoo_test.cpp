// The model zoo: exact published parameter counts, shapes at the default
// sizes, and training graphs that validate, round-trip through the graph
// format, have a finite default-order lower bound and can be planned.
#include <memplan/alloc/greedy.hpp>
#include <memplan/check/validator.hpp>
#include <memplan/io/graph_json.hpp>
#include <memplan/plan/bounds.hpp>
#include <memplan/plan/make_plan.hpp>
#include <memplan/zoo/zoo.hpp>

#include <doctest/doctest.h>

#include <limits>
#include <string>

using namespace memplan;

TEST_CASE("zoo.parameter_counts_match_the_published_architectures") {
    zoo_options small;
    small.batch = 1;
    auto count = [&](std::string_view name) { return nn::parameter_count(zoo_network(name, small)); };
    CHECK(count("resnet18") == 11'689'512);
    CHECK(count("resnet50") == 25'557'032);
    CHECK(count("vgg16") == 138'357'544);
    CHECK(count("mobilenet_v2") == 3'504'872);
    CHECK(count("googlenet") == 6'624'904);
    CHECK(count("bert_base") == 85'054'464);
    CHECK(count("gpt2") == 124'439'808);

    // U-Net as defined in zoo/unet.hpp, counted by hand: a 3x3 conv has
    // 9 * in * out + out values, a 2x2 up-conv 4 * in * out + out.
    auto c3 = [](std::uint64_t i, std::uint64_t o) { return 9 * i * o + o; };
    auto up = [](std::uint64_t i, std::uint64_t o) { return 4 * i * o + o; };
    std::uint64_t unet = c3(3, 64) + c3(64, 64);
    for (std::uint64_t w = 128; w <= 1024; w *= 2) unet += c3(w / 2, w) + c3(w, w);
    for (std::uint64_t w = 1024; w >= 128; w /= 2) unet += up(w, w / 2) + c3(w, w / 2) + c3(w / 2, w / 2);
    unet += 64 * 2 + 2; // 1x1 output convolution to 2 classes
    CHECK(unet == 31'031'810);
    CHECK(count("unet") == unet);
}

TEST_CASE("zoo.default_sizes_and_shapes") {
    CHECK(zoo_names().size() == 9);
    CHECK(zoo_default("llama").seq == 4096);
    CHECK(zoo_default("resnet50").batch == 184);
    CHECK(zoo_default("googlenet").batch == 320);
    CHECK(zoo_default("unet").batch == 11);
    CHECK(zoo_default("unet").height == 416);
    CHECK(zoo_default("unet").width == 608);
    CHECK(zoo_default("mobilenet_v2").batch == 272);
    CHECK(zoo_default("vgg16").batch == 176);
    CHECK(zoo_default("bert_base").seq == 512);
    CHECK(zoo_default("gpt2").seq == 1024);

    const auto net = zoo_network("resnet50");
    const auto& fc = net.nodes()[net.nodes().size() - 2];
    CHECK(fc.name == "fc");
    CHECK(net.info(fc.inputs[0]).shape == nn::shape{184, 2048});
    const auto unet = zoo_network("unet");
    CHECK(net.info(net.loss()).shape == nn::shape{});
    CHECK(unet.info(unet.nodes()[unet.nodes().size() - 2].output).shape == nn::shape{11, 2, 416, 608});

    zoo_options o;
    o.batch = 3;
    o.seq = 128;
    const auto gpt = zoo_network("gpt2", o);
    CHECK(gpt.info(gpt.nodes()[gpt.nodes().size() - 2].output).shape == nn::shape{3, 128, 50257});
    CHECK(zoo_graph("resnet18", o).name() == "resnet18-train-b3");
}

TEST_CASE("zoo.errors") {
    try {
        (void)zoo_network("alexnet");
        FAIL("no error");
    } catch (const error& e) {
        CHECK(e.category() == "zoo");
        CHECK(std::string(e.what()).find("unknown model 'alexnet'; expected one of resnet18, resnet50") !=
              std::string::npos);
    }
    zoo_options o;
    o.seq = 2048;
    CHECK_THROWS_AS((void)zoo_network("gpt2", o), error);
    o = {};
    o.height = 100;
    o.width = 100;
    CHECK_THROWS_AS((void)zoo_network("unet", o), error);
    o.height = o.width = 8; // too small for ResNet's stem and pools
    CHECK_THROWS_AS((void)zoo_network("vgg16", o), error);
}

TEST_CASE("zoo.every_training_graph_validates") {
    for (auto name : zoo_names()) {
        CAPTURE(name);
        zoo_options o;
        o.batch = 2;
        o.seq = 128;
        o.opt = optimizer::adam;
        o.dt = nn::dtype::fp32; // llama's default is bf16 with fp32 master weights (zoo_llama_test.cpp)
        if (name == "llama") o.preset = "tiny";
        const graph g = zoo_graph(name, o);
        validate(g);
        const auto net = zoo_network(name, o);
        std::size_t updates = 0;
        for (const auto& op : g.ops()) updates += op.phase == phase::update;
        std::size_t trainable = 0;
        for (const auto& p : net.parameters()) trainable += p.trainable;
        CHECK(updates == trainable);

        const auto lb = schedule_lower_bound(g, default_schedule(g));
        std::uint64_t persistent = 0;
        for (const auto& t : g.tensors()) persistent += t.persistent ? t.bytes : 0;
        CHECK(persistent == 3 * 4 * nn::parameter_count(net) + [&] {
                  std::uint64_t state = 0; // batch-norm running statistics
                  for (const auto& p : net.parameters()) state += p.trainable ? 0 : 4 * p.shape.numel();
                  return state;
              }());
        CHECK(lb > persistent);
        CHECK(lb < std::numeric_limits<std::uint64_t>::max());
        CHECK(lb >= schedule_free_lower_bound(g));
    }
}

TEST_CASE("zoo.graph_round_trips_through_the_format") {
    zoo_options o;
    o.batch = 2;
    o.dt = nn::dtype::bf16;
    const graph g = zoo_graph("googlenet", o);
    const graph back = parse_graph_json(format_graph_json(g), "googlenet.json");
    REQUIRE(back.num_ops() == g.num_ops());
    REQUIRE(back.num_tensors() == g.num_tensors());
    CHECK(back.name() == "googlenet-train-b2");
    for (std::size_t i = 0; i < g.num_ops(); ++i) {
        const auto& a = g.op(static_cast<graph::id_type>(i));
        const auto& b = back.op(static_cast<graph::id_type>(i));
        CHECK(a.name == b.name);
        CHECK(a.phase == b.phase);
        CHECK(a.variants.size() == b.variants.size());
        CHECK(a.inplace.size() == b.inplace.size());
    }
    CHECK(schedule_lower_bound(back, default_schedule(back)) == schedule_lower_bound(g, default_schedule(g)));
}

TEST_CASE("zoo.graphs_plan_and_pass_the_validator") {
    for (auto name : {"resnet18", "bert_base"}) {
        CAPTURE(name);
        zoo_options o;
        o.batch = 2;
        o.seq = 64;
        const graph g = zoo_graph(name, o);
        const auto planned = make_plan(g, default_schedule(g), greedy_by_size{});
        REQUIRE(has_solution(planned.status));
        const auto report = check_plan(g, planned.plan);
        CHECK_MESSAGE(report.ok(), report.to_string());
        CHECK(planned.plan.arena_bytes >= planned.bound);
    }
}
