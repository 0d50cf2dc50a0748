// CBC (COIN-OR branch-and-cut) backend of `SolverLike` (opt-in: link
// memplan::cbc; CBC is EPL-2.0), through CBC's C interface.
//
// CBC is a C++ library underneath: its failures surface as C++ exceptions
// (CoinError), which are caught here and turned into `error` results. CBC
// 2.10 parses its run options through process-wide state (CbcMain1's command
// reader), so solves are serialised by a mutex; model building, which is most
// of the cost outside the search, runs in parallel. A model without integer
// columns (an LP) is solved by CBC's LP solver, Clp, directly: through CBC the
// root LP ignores the time limit (a 44k-column LP took 3.0 s of a 2 s limit),
// while Clp stops its simplex at a wall-clock limit.
#pragma once

#include <memplan/solver/model.hpp>
#include <memplan/solver/solver.hpp>

#include <coin/Cbc_C_Interface.h>
#include <coin/ClpSimplex.hpp>

#include <algorithm>
#include <cfloat>
#include <chrono>
#include <cmath>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>
#include <vector>

namespace memplan {

namespace detail {

inline std::mutex& cbc_mutex() {
    static std::mutex m;
    return m;
}

struct cbc_model_deleter {
    void operator()(Cbc_Model* m) const noexcept { Cbc_deleteModel(m); }
};

/// CBC's infinity is DBL_MAX; it does not document IEEE infinities.
inline double cbc_bound(double v) noexcept {
    if (v == milp_infinity) return DBL_MAX;
    if (v == -milp_infinity) return -DBL_MAX;
    return v;
}

} // namespace detail

/// CBC 2.10 branch-and-cut. Thread safe (solves are serialised, see above).
struct cbc_solver {
    static constexpr std::string_view name = "cbc";

    /// Solves `m` by `o.time_limit`; never throws for solver
    /// outcomes and never aborts.
    milp_result solve(const milp_model& m, const solve_options& o) const {
        using clock = std::chrono::steady_clock;
        const auto start = clock::now();
        auto finish = [&](milp_result r) {
            r.seconds = std::chrono::duration<double>(clock::now() - start).count();
            return r;
        };
        if (auto fault = validate_model(m)) return finish(invalid_model_result(*fault));
        try {
            return finish(run(m, o, o.time_limit.from_now()));
        } catch (const std::exception& e) {
            milp_result r;
            r.status = status::error;
            r.message = std::string("CBC failed: ") + e.what();
            return finish(std::move(r));
        } catch (...) {
            // CoinError does not derive from std::exception.
            milp_result r;
            r.status = status::error;
            r.message = "CBC failed with an exception (CoinError)";
            return finish(std::move(r));
        }
    }

private:
    static milp_result run(const milp_model& m, const solve_options& o, memplan::deadline until) {
        const int n = static_cast<int>(m.columns.size());
        const int rows = static_cast<int>(m.rows.size());
        const bool minimize = m.sense == objective_sense::minimize;
        milp_result r;

        bool use_incumbent = false;
        if (!m.incumbent.empty()) {
            if (auto why = check_solution(m, m.incumbent)) r.message = "incumbent ignored: " + *why;
            else use_incumbent = true;
        }

        // Column-major matrix for Cbc_loadProblem.
        std::vector<int> start_of(static_cast<std::size_t>(n) + 1, 0);
        for (const auto& row : m.rows)
            for (const auto& t : row.terms) ++start_of[t.column + 1];
        for (int j = 0; j < n; ++j) start_of[j + 1] += start_of[j];
        std::vector<int> row_index(static_cast<std::size_t>(start_of[n]));
        std::vector<double> coef(row_index.size());
        {
            std::vector<int> fill(start_of.begin(), start_of.end() - 1);
            for (int i = 0; i < rows; ++i)
                for (const auto& t : m.rows[i].terms) {
                    const int at = fill[t.column]++;
                    row_index[at] = i;
                    coef[at] = t.coefficient;
                }
        }
        std::vector<double> col_lo(n), col_hi(n), obj(n), row_lo(rows), row_hi(rows);
        for (int j = 0; j < n; ++j) {
            const auto [lo, hi] = detail::effective_bounds(m.columns[j]);
            col_lo[j] = detail::cbc_bound(lo);
            col_hi[j] = detail::cbc_bound(hi);
            obj[j] = m.columns[j].objective;
        }
        for (int i = 0; i < rows; ++i) {
            row_lo[i] = detail::cbc_bound(m.rows[i].lower);
            row_hi[i] = detail::cbc_bound(m.rows[i].upper);
        }

        if (n == 0) {
            // CBC has nothing to solve; the rows are constants.
            for (int i = 0; i < rows; ++i)
                if (m.rows[i].lower > 0 || m.rows[i].upper < 0) {
                    r.status = status::infeasible;
                    r.message = detail::row_label(m, i) + " has no terms and excludes 0";
                    return r;
                }
            r.status = status::optimal;
            r.objective = r.bound = m.objective_offset;
            return r;
        }

        if (!m.has_integers()) return run_lp(m, n, rows, start_of, row_index, coef, col_lo, col_hi, obj, row_lo, row_hi,
                                             minimize, o, until, std::move(r));

        std::unique_ptr<Cbc_Model, detail::cbc_model_deleter> cbc(Cbc_newModel());
        Cbc_Model* model = cbc.get();
        Cbc_loadProblem(model, n, rows, start_of.data(), row_index.data(), coef.data(), col_lo.data(), col_hi.data(),
                        obj.data(), row_lo.data(), row_hi.data());
        for (int j = 0; j < n; ++j)
            if (m.columns[j].kind != column_kind::continuous) Cbc_setInteger(model, j);
        Cbc_setObjSense(model, minimize ? 1.0 : -1.0);
        Cbc_setLogLevel(model, o.verbose ? 1 : 0);
        Cbc_setParameter(model, "timeMode", "elapsed"); // the limit is wall time, as for GLPK (default: CPU time)
        // CBC 2.10's root preprocessing ignores the time limit and was seen to
        // crash in CglPreProcess::postProcess on short limits; without it CBC
        // is slower to prove but stops on time and stays up.
        Cbc_setParameter(model, "preprocess", "off");
        if (o.relative_gap > 0) Cbc_setAllowableFractionGap(model, o.relative_gap);
        std::vector<int> all_columns;
        if (use_incumbent) {
            all_columns.resize(static_cast<std::size_t>(n));
            for (int j = 0; j < n; ++j) all_columns[j] = j;
            std::vector<double> x(m.incumbent);
            for (int j = 0; j < n; ++j)
                if (m.columns[j].kind != column_kind::continuous) x[j] = std::round(x[j]);
            Cbc_setMIPStartI(model, n, all_columns.data(), x.data());
        }

        {
            std::lock_guard lock(detail::cbc_mutex());
            // The wait for the lock counts against the caller's budget.
            const double left = until.remaining();
            Cbc_setMaximumSeconds(model, std::max(0.01, std::min(left, 1e9)));
            Cbc_solve(model);
        }

        const bool is_mip = m.has_integers();
        r.nodes = is_mip ? Cbc_getNodeCount(model) : 0;
        const double* best = is_mip ? Cbc_bestSolution(model) : nullptr;
        if (!is_mip && Cbc_isProvenOptimal(model)) best = Cbc_getColSolution(model);
        const bool found = best != nullptr;
        if (found) {
            r.values.assign(best, best + n);
            for (int j = 0; j < n; ++j)
                if (m.columns[j].kind != column_kind::continuous) r.values[j] = std::round(r.values[j]);
            r.objective = objective_value(m, r.values);
        }
        // CBC reports the bound in the model's own sense, without the offset.
        double bound = Cbc_getBestPossibleObjValue(model);
        if (std::fabs(bound) < 1e300) r.bound = bound + m.objective_offset;
        if (found && !std::isnan(r.bound))
            r.bound = minimize ? std::min(r.bound, r.objective) : std::max(r.bound, r.objective);

        if (Cbc_isProvenOptimal(model) && found) {
            r.status = status::optimal;
            r.bound = r.objective;
        } else if (Cbc_isContinuousUnbounded(model)) {
            r.status = status::unbounded;
            r.message = is_mip ? "LP relaxation is unbounded" : "LP is unbounded";
        } else if (Cbc_isProvenInfeasible(model)) {
            r.status = status::infeasible;
            r.message = is_mip ? "no integer solution exists (CBC proved infeasibility)" : "LP is infeasible";
        } else if (Cbc_isAbandoned(model)) {
            r.status = status::error;
            r.message = "CBC abandoned the search (numerical difficulties)";
        } else if (found) {
            r.status = status::feasible;
            if (Cbc_secondaryStatus(model) == 2) r.message = "stopped at the relative gap tolerance";
        } else if (Cbc_isSecondsLimitReached(model) || Cbc_status(model) == 1) {
            r.status = status::no_solution;
            r.message = "time limit reached before an integer solution was found";
        } else {
            r.status = status::error;
            r.message = "CBC ended with status " + std::to_string(Cbc_status(model)) + " / " +
                        std::to_string(Cbc_secondaryStatus(model));
        }
        if (has_solution(r.status))
            if (auto why = check_solution(m, r.values, 1e-6)) {
                r.status = status::error;
                r.message = "CBC returned a solution that fails the check: " + *why;
            }
        return r;
    }

    /// An LP on Clp, stopped at `until` (wall clock): optimal, infeasible,
    /// unbounded, or no_solution when the limit came first (no bound then).
    static milp_result run_lp(const milp_model& m, int n, int rows, const std::vector<int>& start_of,
                              const std::vector<int>& row_index, const std::vector<double>& coef,
                              const std::vector<double>& col_lo, const std::vector<double>& col_hi,
                              const std::vector<double>& obj, const std::vector<double>& row_lo,
                              const std::vector<double>& row_hi, bool minimize, const solve_options& o,
                              memplan::deadline until, milp_result r) {
        ClpSimplex lp;
        lp.loadProblem(n, rows, start_of.data(), row_index.data(), coef.data(), col_lo.data(), col_hi.data(),
                       obj.data(), row_lo.data(), row_hi.data());
        lp.setOptimizationDirection(minimize ? 1.0 : -1.0);
        lp.setLogLevel(o.verbose ? 1 : 0);
        {
            std::lock_guard lock(detail::cbc_mutex());
            // Both limits are relative to now (Clp adds its clocks' readings); the CPU one is a
            // backstop, the wall one the caller's budget, the wait for the lock included.
            const double left = std::max(0.01, std::min(until.remaining(), 1e9));
            lp.setMaximumWallSeconds(left);
            lp.setMaximumSeconds(left);
            lp.initialSolve();
        }
        if (lp.isProvenOptimal()) {
            const double* x = lp.getColSolution();
            r.values.assign(x, x + n);
            r.objective = objective_value(m, r.values);
            r.bound = r.objective;
            r.status = status::optimal;
        } else if (lp.isProvenPrimalInfeasible()) {
            r.status = status::infeasible;
            r.message = "LP is infeasible";
        } else if (lp.isProvenDualInfeasible()) {
            r.status = status::unbounded;
            r.message = "LP is unbounded";
        } else if (lp.status() == 3 || lp.hitMaximumIterations()) {
            r.status = status::no_solution;
            r.message = "time limit reached while solving the LP";
        } else {
            r.status = status::error;
            r.message = "Clp ended with status " + std::to_string(lp.status()) + " / " +
                        std::to_string(lp.secondaryStatus()) + (lp.isAbandoned() ? " (numerical difficulties)" : "");
        }
        if (has_solution(r.status))
            if (auto why = check_solution(m, r.values, 1e-6)) {
                r.status = status::error;
                r.message = "Clp returned a solution that fails the check: " + *why;
            }
        return r;
    }
};

static_assert(SolverLike<cbc_solver>);

} // namespace memplan
