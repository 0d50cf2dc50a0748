// Command-line helpers shared by the table printers in bench/.
#pragma once

#include <memplan/core/error.hpp>

#include <sstream>
#include <string>
#include <vector>

namespace memplan::bench {

/// "a,b,,c" -> {"a", "b", "c"}.
inline std::vector<std::string> split_list(const std::string& s) {
    std::vector<std::string> out;
    std::stringstream ss(s);
    for (std::string x; std::getline(ss, x, ',');)
        if (!x.empty()) out.push_back(x);
    return out;
}

/// Reads the command line in order: `on_option(name, value)` for each
/// argument, where `value()` takes the next one as that option's value;
/// `on_option` returns whether it knew the option. Throws `memplan::error`
/// naming an unknown option or one without its value.
template <class OnOption>
void parse_options(int argc, char** argv, OnOption on_option) {
    for (int i = 1; i < argc; ++i) {
        const std::string name = argv[i];
        auto value = [&]() -> std::string {
            if (i + 1 >= argc) throw error("bench", "option " + name + " needs a value");
            return argv[++i];
        };
        if (!on_option(name, value)) throw error("bench", "unknown option " + name);
    }
}

} // namespace memplan::bench
