// The smallest real use of memplan from outside: build a graph, plan it,
// check the plan with the independent validator.
#include <memplan/memplan.hpp>

#include <iostream>

int main() {
    memplan::graph g("consumer");
    g.add_tensor("x", 4096);
    g.add_tensor("y", 4096);
    g.add_tensor("z", 1024);
    g.add_op("load", {}, {"x"});
    g.add_op("relu", {"x"}, {"y"});
    g.add_op("pool", {"y"}, {"z"});
    g.add_output(*g.find_tensor("z"));
    memplan::validate(g);

    const auto result = memplan::make_plan(g, memplan::default_schedule(g), memplan::greedy_by_size{});
    const auto report = memplan::check_plan(g, result.plan);
    if (!report.ok()) {
        std::cerr << report.to_string();
        return 1;
    }
    std::cout << "consumer: valid plan, arena " << result.plan.arena_bytes << " bytes, lower bound "
              << result.bound << "\n";
    return 0;
}
