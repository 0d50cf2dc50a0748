// Command-line helpers shared by the table printers in bench/.
#pragma once

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

} // namespace memplan::bench
