// A tiny command-line parser for the memplan command: each subcommand lists
// the options it takes; anything else is an error that names the argument.
// `--opt value` and `--opt=value` are both accepted; `--` ends the options.
#pragma once

#include <memplan/core/error.hpp>

#include <charconv>
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace memplan::cli {

/// One option a subcommand accepts: its names (e.g. {"-o", "--output"}) and
/// whether it takes a value. The first name is the key in `parsed_args`.
struct option_spec {
    std::vector<std::string_view> names;
    bool takes_value = true;
};

struct parsed_args {
    std::string command; ///< for messages: "memplan plan"
    std::vector<std::string> positional;
    std::map<std::string, std::string, std::less<>> options; ///< key: the option's first name

    bool has(std::string_view key) const { return options.find(key) != options.end(); }

    std::optional<std::string> value(std::string_view key) const {
        if (auto it = options.find(key); it != options.end()) return it->second;
        return std::nullopt;
    }
    std::string value_or(std::string_view key, std::string fallback) const {
        return value(key).value_or(std::move(fallback));
    }
    /// The value of a required option; throws naming it when absent.
    std::string required(std::string_view key) const {
        if (auto v = value(key)) return *v;
        throw error("cli", command + ": missing required option " + std::string(key));
    }

    /// The value of `key` as an unsigned integer >= `min`, or `fallback`.
    std::uint64_t integer_or(std::string_view key, std::uint64_t fallback, std::uint64_t min = 0) const {
        const auto v = value(key);
        if (!v) return fallback;
        std::uint64_t x = 0;
        const char* b = v->data();
        const char* e = b + v->size();
        const auto [p, ec] = std::from_chars(b, e, x);
        if (v->empty() || ec != std::errc{} || p != e)
            throw error("cli", "option " + std::string(key) + " wants a non-negative integer, got '" + *v + "'");
        if (x < min)
            throw error("cli", "option " + std::string(key) + " must be at least " + std::to_string(min) + ", got " +
                                   *v);
        return x;
    }

    /// Requires between `min` and `max` positional arguments, named in `what`.
    void expect_positional(std::size_t min, std::size_t max, std::string_view what) const {
        if (positional.size() < min)
            throw error("cli", command + ": missing argument " + std::string(what));
        if (positional.size() > max)
            throw error("cli", command + ": unexpected argument '" + positional[max] + "'");
    }
};

/// Parses `args` (after the subcommand) against `specs`. Throws
/// `memplan::error("cli")` naming an unknown option, a missing value or an
/// option given twice.
inline parsed_args parse_args(std::string command, const std::vector<std::string>& args,
                              const std::vector<option_spec>& specs) {
    parsed_args out;
    out.command = std::move(command);
    auto find = [&](std::string_view name) -> const option_spec* {
        for (const auto& s : specs)
            for (auto n : s.names)
                if (n == name) return &s;
        return nullptr;
    };
    bool options_done = false;
    for (std::size_t i = 0; i < args.size(); ++i) {
        const std::string& a = args[i];
        if (options_done || a.size() < 2 || a[0] != '-') {
            out.positional.push_back(a);
            continue;
        }
        if (a == "--") {
            options_done = true;
            continue;
        }
        std::string_view name = a;
        std::optional<std::string> inline_value;
        if (a.rfind("--", 0) == 0)
            if (auto eq = a.find('='); eq != std::string::npos) {
                name = std::string_view(a).substr(0, eq);
                inline_value = a.substr(eq + 1);
            }
        const option_spec* spec = find(name);
        if (!spec) throw error("cli", out.command + ": unknown option '" + std::string(name) + "'");
        const std::string key(spec->names.front());
        if (out.has(key)) throw error("cli", out.command + ": option " + key + " is given twice");
        if (!spec->takes_value) {
            if (inline_value) throw error("cli", out.command + ": option " + std::string(name) + " takes no value");
            out.options[key] = "";
        } else if (inline_value) {
            out.options[key] = *inline_value;
        } else {
            if (i + 1 >= args.size())
                throw error("cli", out.command + ": option " + std::string(name) + " needs a value");
            out.options[key] = args[++i];
        }
    }
    return out;
}

} // namespace memplan::cli
