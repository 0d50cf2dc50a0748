// The memplan command: plans, checks and reports on graphs and offset
// instances from the shell. One file per subcommand under commands/; the
// table here lists them. Exit codes: 0 success, 1 a negative answer (an
// invalid plan, a capacity exceeded, no plan found within a budget in the
// time limit), 2 bad arguments or input (one line `memplan: error: ...`,
// nothing written), 3 an internal error (a planner produced something the
// validator rejects), 4 a budget that no schedule can meet (one line
// `memplan: infeasible: ...`, nothing written).
#include "common.hpp"

#include <exception>
#include <iostream>
#include <string>
#include <string_view>
#include <vector>

#ifndef MEMPLAN_VERSION
#define MEMPLAN_VERSION "unknown"
#endif

namespace {

using namespace memplan::cli;

const std::vector<const command*>& commands() {
    static const std::vector<const command*> table{
        &stats_command,  &plan_command,      &pareto_command,     &check_command,
        &alloc_command,  &check_csv_command, &import_csv_command, &import_checkmate_command,
        &zoo_command,    &report_command,
    };
    return table;
}

const command* find_command(std::string_view name) {
    for (const command* c : commands())
        if (c->name == name) return c;
    return nullptr;
}

void print_usage() {
    std::cout << "usage: memplan COMMAND [ARGS...]\n\n"
                 "memplan plans the memory of deep-network training: where every tensor lives in one arena.\n\n"
                 "commands:\n";
    std::size_t w = 0;
    for (const command* c : commands()) w = std::max(w, c->name.size());
    for (const command* c : commands())
        std::cout << "  " << c->name << std::string(w - c->name.size() + 2, ' ') << c->summary << "\n";
    std::cout << "  help" << std::string(w - 4 + 2, ' ') << "help CMD shows the options of a command\n"
              << "\nexit codes: 0 done, 1 invalid plan, capacity exceeded or no plan found within a budget,\n"
                 "2 bad arguments or input, 3 internal error, 4 a budget no schedule can meet.\n"
                 "Options: --help, --version.\n";
}

int run(const std::vector<std::string>& args) {
    if (args.empty()) throw memplan::error("cli", "no command given; try 'memplan --help'");
    const std::string& name = args[0];
    if (name == "--help" || name == "-h") {
        print_usage();
        return exit_ok;
    }
    if (name == "--version") {
        std::cout << "memplan " MEMPLAN_VERSION "\n";
        return exit_ok;
    }
    if (name == "help") {
        if (args.size() == 1) {
            print_usage();
            return exit_ok;
        }
        if (args.size() > 2) throw memplan::error("cli", "memplan help: unexpected argument '" + args[2] + "'");
        const command* c = find_command(args[1]);
        if (!c) throw memplan::error("cli", "memplan help: unknown command '" + args[1] + "'");
        print_help(*c);
        return exit_ok;
    }
    const command* c = find_command(name);
    if (!c) {
        if (!name.empty() && name[0] == '-') throw memplan::error("cli", "unknown option '" + name + "'");
        throw memplan::error("cli", "unknown command '" + name + "'; try 'memplan --help'");
    }
    return c->run(*c, std::vector<std::string>(args.begin() + 1, args.end()));
}

/// The message of an exception as one line.
std::string one_line(std::string s) {
    while (!s.empty() && s.back() == '\n') s.pop_back();
    for (auto& ch : s)
        if (ch == '\n' || ch == '\r') ch = ' ';
    return s;
}

} // namespace

int main(int argc, char** argv) {
    try {
        std::vector<std::string> args(argv + 1, argv + argc);
        return run(args);
    } catch (const memplan::error& e) {
        std::cout.flush();
        std::cerr << "memplan: error: " << one_line(e.message()) << "\n";
        return 2;
    } catch (const internal_error& e) {
        std::cout.flush();
        std::cerr << "memplan: internal error: " << e.what() << "\n";
        return exit_internal;
    } catch (const std::exception& e) {
        std::cout.flush();
        std::cerr << "memplan: internal error: " << one_line(e.what()) << "\n";
        return exit_internal;
    } catch (...) {
        std::cerr << "memplan: internal error: unknown exception\n";
        return exit_internal;
    }
}
