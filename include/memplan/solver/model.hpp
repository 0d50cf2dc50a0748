// A backend-neutral mixed-integer linear program and the result of solving it.
//
// Planners build a `milp_model` (columns with bounds and a kind, sparse rows
// with a lower and an upper bound) and hand it to any `SolverLike` backend.
// The model is checked here, before any backend sees it, so that malformed
// input becomes an `error` result naming the column or row instead of a
// solver crash. Solver outcomes are values (`milp_result`), never exceptions.
#pragma once

#include <memplan/core/deadline.hpp>
#include <memplan/core/status.hpp>

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <limits>
#include <optional>
#include <string>
#include <utility>
#include <vector>

namespace memplan {

/// +infinity, the "no bound" value for column and row bounds.
inline constexpr double milp_infinity = std::numeric_limits<double>::infinity();

enum class column_kind { continuous, integer, binary };
enum class objective_sense { minimize, maximize };

struct milp_column {
    std::string name;
    column_kind kind = column_kind::continuous;
    double lower = 0;            ///< may be -milp_infinity
    double upper = milp_infinity; ///< may be +milp_infinity
    double objective = 0;        ///< coefficient in the objective
};

struct milp_term {
    std::size_t column = 0;
    double coefficient = 0;
};

/// lower <= sum(coefficient * column) <= upper; an infinite side is absent,
/// so one type covers <=, >=, == and ranged rows.
struct milp_row {
    std::string name;
    std::vector<milp_term> terms;
    double lower = -milp_infinity;
    double upper = milp_infinity;
};

/// How a backend solves a model without integer columns.
enum class lp_algorithm {
    simplex,  ///< a vertex, proven optimal (the default)
    interior, ///< an interior-point method: usually much faster on large sparse LPs; the point need not be a vertex
};

struct solve_options {
    memplan::time_limit time_limit = 10.0; ///< seconds from the solve's start, or the caller's deadline
    double relative_gap = 0;        ///< stop once |objective - bound| <= gap * |objective|
    bool verbose = false;           ///< let the backend print its log
    /// For pure LPs only (a MILP's relaxations stay with simplex: branch and
    /// bound needs a basis). A backend without an interior-point method uses
    /// simplex. An interior-point run that stops short of its tolerance
    /// (GLPK: numerical instability, often near the optimum) reports
    /// `status::feasible` with its best point, columns clipped to their
    /// bounds, when every row holds within 1e-3 relative; else an error.
    lp_algorithm lp_method = lp_algorithm::simplex;};

/// A MILP: minimise or maximise objective_offset + sum(objective * column)
/// subject to the rows and the column bounds and kinds.
struct milp_model {
    std::vector<milp_column> columns;
    std::vector<milp_row> rows;
    objective_sense sense = objective_sense::minimize;
    double objective_offset = 0;
    /// Optional warm start: empty, or one value per column. Backends use it
    /// only when `check_solution` accepts it, so a wrong guess costs nothing.
    std::vector<double> incumbent;

    /// Adds a column and returns its index.
    std::size_t add_column(std::string name, column_kind kind, double lower, double upper, double objective = 0) {
        columns.push_back({std::move(name), kind, lower, upper, objective});
        return columns.size() - 1;
    }
    std::size_t add_binary(std::string name, double objective = 0) {
        return add_column(std::move(name), column_kind::binary, 0, 1, objective);
    }
    /// Adds the row lower <= terms <= upper and returns its index.
    std::size_t add_row(std::string name, std::vector<milp_term> terms, double lower, double upper) {
        rows.push_back({std::move(name), std::move(terms), lower, upper});
        return rows.size() - 1;
    }
    std::size_t add_le(std::string name, std::vector<milp_term> terms, double rhs) {
        return add_row(std::move(name), std::move(terms), -milp_infinity, rhs);
    }
    std::size_t add_ge(std::string name, std::vector<milp_term> terms, double rhs) {
        return add_row(std::move(name), std::move(terms), rhs, milp_infinity);
    }
    std::size_t add_eq(std::string name, std::vector<milp_term> terms, double rhs) {
        return add_row(std::move(name), std::move(terms), rhs, rhs);
    }

    bool has_integers() const noexcept {
        for (const auto& c : columns)
            if (c.kind != column_kind::continuous) return true;
        return false;
    }
};

struct milp_result {
    memplan::status status = memplan::status::error;
    double objective = 0;  ///< of `values`, offset included (when has_solution)
    /// Proven bound on the optimum in the objective's direction (a lower bound
    /// when minimising); equal to `objective` when optimal. NaN when unknown.
    double bound = std::numeric_limits<double>::quiet_NaN();
    std::vector<double> values; ///< one per column (when has_solution)
    double seconds = 0;         ///< wall time of the solve
    std::int64_t nodes = 0;     ///< branch-and-bound nodes (0 for an LP)
    std::string message;        ///< reason for error / infeasible; notes otherwise

    /// |objective - bound| / max(|objective|, 1e-9); 0 when optimal, NaN when
    /// there is no solution or no bound.
    double gap() const noexcept {
        if (!has_solution(status) || std::isnan(bound)) return std::numeric_limits<double>::quiet_NaN();
        if (status == memplan::status::optimal) return 0;
        return std::fabs(objective - bound) / std::max(std::fabs(objective), 1e-9);
    }
};

namespace detail {

inline std::string column_label(const milp_model& m, std::size_t j) {
    std::string s = "column " + std::to_string(j);
    if (j < m.columns.size() && !m.columns[j].name.empty()) s += " '" + m.columns[j].name + "'";
    return s;
}

inline std::string row_label(const milp_model& m, std::size_t i) {
    std::string s = "row " + std::to_string(i);
    if (i < m.rows.size() && !m.rows[i].name.empty()) s += " '" + m.rows[i].name + "'";
    return s;
}

/// Bounds a backend should use: binaries clipped to [0, 1].
inline std::pair<double, double> effective_bounds(const milp_column& c) noexcept {
    if (c.kind == column_kind::binary) return {std::max(c.lower, 0.0), std::min(c.upper, 1.0)};
    return {c.lower, c.upper};
}

} // namespace detail

/// Checks a model before it reaches a backend: finite coefficients, bounds in
/// order, binaries inside [0, 1], column indices in range and not repeated in
/// a row, an incumbent of the right length. Returns the first fault, naming
/// its column or row; nullopt when the model is well formed.
inline std::optional<std::string> validate_model(const milp_model& m) {
    if (!std::isfinite(m.objective_offset)) return "objective offset is not finite";
    if (m.columns.size() > static_cast<std::size_t>(std::numeric_limits<int>::max() - 1) ||
        m.rows.size() > static_cast<std::size_t>(std::numeric_limits<int>::max() - 1))
        return "model has more columns or rows than a backend can index";
    for (std::size_t j = 0; j < m.columns.size(); ++j) {
        const auto& c = m.columns[j];
        const auto label = detail::column_label(m, j);
        if (!std::isfinite(c.objective)) return label + " has a non-finite objective coefficient";
        if (std::isnan(c.lower) || std::isnan(c.upper)) return label + " has a NaN bound";
        if (c.lower == milp_infinity) return label + " has lower bound +infinity";
        if (c.upper == -milp_infinity) return label + " has upper bound -infinity";
        if (c.lower > c.upper)
            return label + " has lower bound " + std::to_string(c.lower) + " above upper bound " + std::to_string(c.upper);
        if (c.kind == column_kind::binary && (c.lower < 0 || c.upper > 1 || c.lower > 1 || c.upper < 0))
            return label + " is binary with bounds outside [0, 1]";
    }
    std::vector<std::size_t> seen_in(m.columns.size(), static_cast<std::size_t>(-1));
    for (std::size_t i = 0; i < m.rows.size(); ++i) {
        const auto& r = m.rows[i];
        const auto label = detail::row_label(m, i);
        if (std::isnan(r.lower) || std::isnan(r.upper)) return label + " has a NaN bound";
        if (r.lower == milp_infinity) return label + " has lower bound +infinity";
        if (r.upper == -milp_infinity) return label + " has upper bound -infinity";
        if (r.lower > r.upper)
            return label + " has lower bound " + std::to_string(r.lower) + " above upper bound " + std::to_string(r.upper);
        for (const auto& t : r.terms) {
            if (t.column >= m.columns.size())
                return label + " refers to column " + std::to_string(t.column) + " but the model has " +
                       std::to_string(m.columns.size()) + " columns";
            if (!std::isfinite(t.coefficient))
                return label + " has a non-finite coefficient on " + detail::column_label(m, t.column);
            if (seen_in[t.column] == i) return label + " names " + detail::column_label(m, t.column) + " twice";
            seen_in[t.column] = i;
        }
    }
    if (!m.incumbent.empty() && m.incumbent.size() != m.columns.size())
        return "incumbent has " + std::to_string(m.incumbent.size()) + " values but the model has " +
               std::to_string(m.columns.size()) + " columns";
    return std::nullopt;
}

/// Objective value of `x` (offset included).
inline double objective_value(const milp_model& m, const std::vector<double>& x) {
    double v = m.objective_offset;
    for (std::size_t j = 0; j < m.columns.size() && j < x.size(); ++j) v += m.columns[j].objective * x[j];
    return v;
}

/// Checks that `x` satisfies the bounds, kinds and rows of a valid model
/// within `tolerance` (relative to the size of the numbers involved). Returns
/// the first violation, naming its column or row; nullopt when feasible.
inline std::optional<std::string> check_solution(const milp_model& m, const std::vector<double>& x,
                                                 double tolerance = 1e-6) {
    if (x.size() != m.columns.size())
        return "solution has " + std::to_string(x.size()) + " values for " + std::to_string(m.columns.size()) + " columns";
    auto tol = [&](double scale) { return tolerance * std::max(1.0, std::fabs(scale)); };
    for (std::size_t j = 0; j < m.columns.size(); ++j) {
        const auto [lo, hi] = detail::effective_bounds(m.columns[j]);
        const double v = x[j];
        if (!std::isfinite(v)) return detail::column_label(m, j) + " is not finite";
        if (v < lo - tol(lo) || v > hi + tol(hi))
            return detail::column_label(m, j) + " = " + std::to_string(v) + " is outside its bounds";
        if (m.columns[j].kind != column_kind::continuous && std::fabs(v - std::round(v)) > tol(1))
            return detail::column_label(m, j) + " = " + std::to_string(v) + " is not integral";
    }
    for (std::size_t i = 0; i < m.rows.size(); ++i) {
        double a = 0, scale = 0;
        for (const auto& t : m.rows[i].terms) {
            a += t.coefficient * x[t.column];
            scale = std::max(scale, std::fabs(t.coefficient * x[t.column]));
        }
        const auto& r = m.rows[i];
        if (a < r.lower - tol(std::max(scale, r.lower)) || a > r.upper + tol(std::max(scale, r.upper)))
            return detail::row_label(m, i) + " is violated: activity " + std::to_string(a) + " outside [" +
                   std::to_string(r.lower) + ", " + std::to_string(r.upper) + "]";
    }
    return std::nullopt;
}

/// The result every backend returns for a model that `validate_model` rejects.
inline milp_result invalid_model_result(std::string reason) {
    milp_result r;
    r.status = status::error;
    r.message = "invalid model: " + std::move(reason);
    return r;
}

} // namespace memplan
