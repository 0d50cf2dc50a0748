// The one exception family of memplan.
//
// Misuse and malformed input throw `memplan::error`; solver outcomes are values
// and never exceptions. Messages carry a bracketed category prefix, in the
// manner of nlohmann/json, so that callers and tests can match on it:
//   [memplan.graph] op 'conv1' reads tensor 'x' which no tensor declares
#pragma once

#include <stdexcept>
#include <string>
#include <string_view>

namespace memplan {

/// Thrown for malformed input and misuse. `what()` names the category, and the
/// op, tensor, file or field at fault.
class error : public std::runtime_error {
public:
    error(std::string_view category, const std::string& message)
        : std::runtime_error("[memplan." + std::string(category) + "] " + message),
          category_(category), message_(message) {}

    /// The category: "graph", "schedule", "plan", "io", "alloc", "cli", ...
    const std::string& category() const noexcept { return category_; }
    /// The message without the "[memplan.<category>] " prefix.
    const std::string& message() const noexcept { return message_; }

private:
    std::string category_;
    std::string message_;
};

} // namespace memplan
