// GLPK backend of `SolverLike` (opt-in: link memplan::glpk; GLPK is GPL-3).
//
// GLPK 5.0 aborts the process on a bad call, so every GLPK call runs under
// `glp_error_hook`, which longjmps back and frees the (thread-local) GLPK
// environment; the model is validated first so that this path stays a last
// resort. Presolve stays off so column numbers are stable and the warm start
// can be handed over in the branch-and-bound callback (GLPK 5.0 reference manual, "GLPK 5.0
// in practice"); the callback also records the best bound, which GLPK does
// not report after glp_intopt. Pure LPs may go to GLPK's interior-point
// method (`solve_options::lp_method`), which has no time limit of its own:
// the output hook watches the clock on each iteration's log line and leaves
// by the same longjmp path as an error.
#pragma once

#include <memplan/solver/model.hpp>
#include <memplan/solver/solver.hpp>

#include <glpk.h>

#include <algorithm>
#include <chrono>
#include <cfloat>
#include <climits>
#include <cmath>
#include <csetjmp>
#include <string>
#include <string_view>
#include <vector>

namespace memplan {

namespace detail {

/// Frees this thread's GLPK environment when the thread ends; GLPK keeps one
/// environment per thread, and without this each finished thread leaks it.
struct glpk_thread_env {
    glpk_thread_env() = default;
    glpk_thread_env(const glpk_thread_env&) = delete;
    glpk_thread_env& operator=(const glpk_thread_env&) = delete;
    ~glpk_thread_env() { glp_free_env(); }
};

inline void glpk_register_thread() {
    thread_local glpk_thread_env guard;
    (void)guard;
}

/// State shared with GLPK's hooks during one guarded run.
struct glpk_session {
    std::jmp_buf jump;
    std::string log;   ///< GLPK's terminal output (always includes its error text)
    bool echo = false; ///< also print GLPK's output
    bool watch = false; ///< leave (as on an error) once `deadline` has passed
    bool timed_out = false;
    std::chrono::steady_clock::time_point deadline{};
};

inline void glpk_on_error(void* info) {
    // GLPK has already printed its message through the terminal hook; leaving
    // by longjmp is the only way not to abort (GLPK calls abort() on return).
    std::longjmp(static_cast<glpk_session*>(info)->jump, 1);
}

inline int glpk_on_output(void* info, const char* text) {
    auto* s = static_cast<glpk_session*>(info);
    // Before anything with a destructor lives in this frame: the jump skips it.
    if (s->watch && std::chrono::steady_clock::now() >= s->deadline) {
        s->timed_out = true;
        std::longjmp(s->jump, 1);
    }
    try {
        s->log.append(text);
        constexpr std::size_t keep = 8192;
        if (s->log.size() > 2 * keep) s->log.erase(0, s->log.size() - keep);
    } catch (...) {
        // Losing log text is better than letting an exception unwind through C frames.
    }
    return s->echo ? 0 : 1; // nonzero: GLPK does not print it
}

// Kept out of line so that setjmp sits in a frame of its own with nothing to
// destroy: `f` must only call GLPK and write to storage that outlives it.
template <class F>
[[gnu::noinline]] bool glpk_jump_guard(glpk_session& s, F& f) {
    if (setjmp(s.jump) != 0) return true;
    f();
    return false;
}

/// Runs `f` (GLPK calls only; no objects with destructors may be created in
/// it or in callbacks it triggers) with GLPK's error and terminal hooks set.
/// Returns true when GLPK reported an error: the thread's GLPK environment,
/// and every problem object in it, has then been freed. The error text is in
/// `s.log`.
template <class F>
bool glpk_guarded(glpk_session& s, F&& f) {
    glpk_register_thread();
    // The watch needs the output hook called, so output stays on (the hook swallows it).
    const int previous_out = glp_term_out(s.echo || s.watch ? GLP_ON : GLP_OFF);
    glp_term_hook(glpk_on_output, &s);
    glp_error_hook(glpk_on_error, &s);
    const bool failed = glpk_jump_guard(s, f);
    if (failed) {
        glp_free_env(); // the environment is in an undefined state after an error
        return true;
    }
    // The hooks point at `s`, which is about to go away.
    glp_error_hook(nullptr, nullptr);
    glp_term_hook(nullptr, nullptr);
    glp_term_out(previous_out);
    return false;
}

/// The last non-empty line of a GLPK log (its error message).
inline std::string glpk_last_error(const std::string& log) {
    std::string_view v = log;
    while (!v.empty() && (v.back() == '\n' || v.back() == ' ')) v.remove_suffix(1);
    // GLPK's error report is "<message>\nError detected in file ... at line N".
    std::size_t cut = v.rfind("Error detected");
    std::string_view msg = cut == std::string_view::npos ? v : v.substr(0, cut);
    while (!msg.empty() && (msg.back() == '\n' || msg.back() == ' ')) msg.remove_suffix(1);
    const std::size_t nl = msg.rfind('\n');
    if (nl != std::string_view::npos) msg = msg.substr(nl + 1);
    std::string out(msg);
    if (cut != std::string_view::npos) out += " (" + std::string(v.substr(cut)) + ")";
    return out.empty() ? std::string("GLPK reported an error") : out;
}

/// What the branch-and-bound callback needs and records.
struct glpk_search {
    const double* incumbent = nullptr; ///< 1-based; null: no warm start
    bool offered = false;
    bool minimize = true;
    bool have_bound = false;
    double bound = 0;
    int nodes = 0;
};

inline void glpk_callback(glp_tree* tree, void* info) {
    auto* s = static_cast<glpk_search*>(info);
    int active = 0, current = 0, total = 0;
    glp_ios_tree_size(tree, &active, &current, &total);
    s->nodes = std::max(s->nodes, total);
    if (const int best = glp_ios_best_node(tree); best != 0) {
        const double b = glp_ios_node_bound(tree, best);
        if (std::fabs(b) < DBL_MAX / 2) {
            // The global bound only tightens over time; keep the tightest seen.
            if (!s->have_bound) s->bound = b;
            else s->bound = s->minimize ? std::max(s->bound, b) : std::min(s->bound, b);
            s->have_bound = true;
        }
    }
    if (glp_ios_reason(tree) == GLP_IHEUR && s->incumbent && !s->offered) {
        s->offered = true;
        glp_ios_heur_sol(tree, s->incumbent);
    }
}

inline int glpk_bound_type(double lo, double hi) noexcept {
    const bool has_lo = lo != -milp_infinity, has_hi = hi != milp_infinity;
    if (has_lo && has_hi) return lo == hi ? GLP_FX : GLP_DB; // GLP_DB with lo == hi fails glp_intopt
    if (has_lo) return GLP_LO;
    if (has_hi) return GLP_UP;
    return GLP_FR;
}

inline int glpk_ms(double seconds) noexcept {
    if (!(seconds > 0)) return 1;
    const double ms = std::ceil(seconds * 1000.0);
    return ms >= static_cast<double>(INT_MAX - 1) ? INT_MAX - 1 : std::max(1, static_cast<int>(ms));
}

} // namespace detail

/// GLPK 5 simplex + branch-and-cut (pure LPs optionally by the interior-point method). Safe to use from several threads at once
/// (one problem per thread, each in the thread's own GLPK environment).
/// Note: after a GLPK error it frees the calling thread's GLPK environment,
/// which destroys any other GLPK problem that thread holds.
struct glpk_solver {
    static constexpr std::string_view name = "glpk";

    /// Solves `m` by `o.time_limit`; never throws for solver
    /// outcomes and never aborts.
    milp_result solve(const milp_model& m, const solve_options& o) const {
        using clock = std::chrono::steady_clock;
        const auto start = clock::now();
        const memplan::deadline until = o.time_limit.from_now(); // counted from the call
        auto elapsed = [&] { return std::chrono::duration<double>(clock::now() - start).count(); };
        auto finish = [&](milp_result r) {
            r.seconds = elapsed();
            return r;
        };
        if (auto fault = validate_model(m)) return finish(invalid_model_result(*fault));

        const int n = static_cast<int>(m.columns.size());
        const int rows = static_cast<int>(m.rows.size());
        const bool is_mip = m.has_integers();
        const bool minimize = m.sense == objective_sense::minimize;
        // GLPK's interior point refuses a model without rows or columns; simplex handles those.
        const bool interior = !is_mip && o.lp_method == lp_algorithm::interior && n > 0 && rows > 0;

        milp_result r;
        bool use_incumbent = false;
        if (!m.incumbent.empty()) {
            if (auto why = check_solution(m, m.incumbent)) r.message = "incumbent ignored: " + *why;
            else use_incumbent = true;
        }

        // Everything the guarded region touches is allocated up front: no
        // object with a destructor may live in a frame that GLPK's error hook
        // longjmps over.
        std::vector<int> index(1);
        std::vector<double> value(1);
        std::vector<std::size_t> row_start(m.rows.size() + 1, 0);
        for (std::size_t i = 0; i < m.rows.size(); ++i) {
            row_start[i] = index.size() - 1;
            for (const auto& t : m.rows[i].terms) {
                index.push_back(static_cast<int>(t.column) + 1);
                value.push_back(t.coefficient);
            }
        }
        row_start[m.rows.size()] = index.size() - 1;
        std::vector<double> x1(m.columns.size() + 1, 0.0); // 1-based incumbent for GLPK
        if (use_incumbent)
            for (int j = 0; j < n; ++j) {
                const auto& c = m.columns[j];
                x1[j + 1] = c.kind == column_kind::continuous ? m.incumbent[j] : std::round(m.incumbent[j]);
            }
        std::vector<double> out(m.columns.size(), 0.0);

        detail::glpk_session session;
        session.echo = o.verbose;
        session.watch = interior;
        session.deadline = until.end();
        detail::glpk_search search;
        search.incumbent = use_incumbent ? x1.data() : nullptr;
        search.minimize = minimize;

        int lp_rc = 0, lp_status = 0, lp_dual = 0, mip_rc = 0, mip_status = 0, ipt_rc = 0, ipt_status = 0;
        double lp_obj = 0, obj = 0;
        const int lp_ms = detail::glpk_ms(until.remaining());

        auto body = [&] {
            glp_prob* p = glp_create_prob();
            glp_set_obj_dir(p, minimize ? GLP_MIN : GLP_MAX);
            glp_set_obj_coef(p, 0, m.objective_offset);
            if (n > 0) glp_add_cols(p, n);
            if (rows > 0) glp_add_rows(p, rows);
            for (int j = 0; j < n; ++j) {
                const auto& c = m.columns[j];
                glp_set_col_kind(p, j + 1, c.kind == column_kind::continuous ? GLP_CV : GLP_IV);
                const auto [lo, hi] = detail::effective_bounds(c);
                glp_set_col_bnds(p, j + 1, detail::glpk_bound_type(lo, hi), std::isfinite(lo) ? lo : 0.0,
                                 std::isfinite(hi) ? hi : 0.0);
                glp_set_obj_coef(p, j + 1, c.objective);
            }
            for (int i = 0; i < rows; ++i) {
                const auto& row = m.rows[i];
                glp_set_row_bnds(p, i + 1, detail::glpk_bound_type(row.lower, row.upper),
                                 std::isfinite(row.lower) ? row.lower : 0.0, std::isfinite(row.upper) ? row.upper : 0.0);
                const int len = static_cast<int>(row_start[i + 1] - row_start[i]);
                if (len > 0) glp_set_mat_row(p, i + 1, len, index.data() + row_start[i], value.data() + row_start[i]);
            }
            glp_scale_prob(p, GLP_SF_AUTO);

            if (interior) {
                glp_iptcp ip;
                glp_init_iptcp(&ip);
                ip.msg_lev = GLP_MSG_ALL; // a line per iteration: where the output hook checks the clock
                ipt_rc = glp_interior(p, &ip);
                ipt_status = glp_ipt_status(p);
                if (ipt_status == GLP_OPT || ipt_status == GLP_INFEAS) {
                    // GLP_INFEAS: the best point of a run that stopped early; checked below.
                    obj = glp_ipt_obj_val(p);
                    for (int j = 0; j < n; ++j) out[j] = glp_ipt_col_prim(p, j + 1);
                }
                glp_delete_prob(p);
                return;
            }

            glp_smcp lp;
            glp_init_smcp(&lp);
            lp.msg_lev = o.verbose ? GLP_MSG_ON : GLP_MSG_OFF;
            lp.tm_lim = lp_ms;
            lp.presolve = GLP_OFF;
            lp_rc = glp_simplex(p, &lp);
            lp_status = glp_get_status(p);
            lp_dual = glp_get_dual_stat(p);
            lp_obj = glp_get_obj_val(p);
            if (lp_rc != 0 || lp_status != GLP_OPT) {
                glp_delete_prob(p);
                return;
            }
            if (!is_mip) {
                obj = lp_obj;
                for (int j = 0; j < n; ++j) out[j] = glp_get_col_prim(p, j + 1);
                glp_delete_prob(p);
                return;
            }
            glp_iocp mip;
            glp_init_iocp(&mip);
            mip.msg_lev = o.verbose ? GLP_MSG_ON : GLP_MSG_OFF;
            mip.presolve = GLP_OFF; // presolve renumbers columns, which breaks the warm start
            mip.tm_lim = detail::glpk_ms(until.remaining());
            mip.mip_gap = o.relative_gap > 0 ? o.relative_gap : 0.0;
            mip.cb_func = detail::glpk_callback;
            mip.cb_info = &search;
            mip_rc = glp_intopt(p, &mip);
            mip_status = glp_mip_status(p);
            if (mip_status == GLP_OPT || mip_status == GLP_FEAS) {
                obj = glp_mip_obj_val(p);
                for (int j = 0; j < n; ++j) out[j] = glp_mip_col_val(p, j + 1);
            }
            glp_delete_prob(p);
        };

        if (detail::glpk_guarded(session, body)) {
            if (session.timed_out) {
                r.status = status::no_solution;
                r.message = "time limit reached in the interior-point method";
                return finish(std::move(r));
            }
            r.status = status::error;
            r.message = "GLPK error: " + detail::glpk_last_error(session.log);
            return finish(std::move(r));
        }

        if (interior) return finish(interior_result(m, ipt_rc, ipt_status, obj, std::move(out), std::move(r)));

        // Root LP outcome.
        if (lp_rc == GLP_ETMLIM || lp_rc == GLP_EITLIM) {
            r.status = status::no_solution;
            r.message = "time limit reached while solving the LP relaxation";
            return finish(std::move(r));
        }
        if (lp_rc != 0) {
            r.status = status::error;
            r.message = "glp_simplex failed with code " + std::to_string(lp_rc);
            return finish(std::move(r));
        }
        if (lp_status == GLP_NOFEAS) {
            r.status = status::infeasible;
            r.message = is_mip ? "LP relaxation is infeasible" : "LP is infeasible";
            return finish(std::move(r));
        }
        if (lp_status == GLP_UNBND) {
            r.status = status::unbounded;
            r.message = is_mip ? "LP relaxation is unbounded" : "LP is unbounded";
            return finish(std::move(r));
        }
        if (lp_status != GLP_OPT) {
            r.status = status::error;
            r.message = "glp_simplex ended with status " + std::to_string(lp_status) + " (dual status " +
                        std::to_string(lp_dual) + ")";
            return finish(std::move(r));
        }
        if (!is_mip) {
            r.status = status::optimal;
            r.objective = obj;
            r.bound = obj;
            r.values = std::move(out);
            return finish(std::move(r));
        }

        r.nodes = search.nodes;
        const bool found = mip_status == GLP_OPT || mip_status == GLP_FEAS;
        double bound = search.have_bound ? search.bound : lp_obj;
        // The root LP value is always valid; never report a bound looser than it.
        bound = minimize ? std::max(bound, lp_obj) : std::min(bound, lp_obj);
        if (found) {
            for (int j = 0; j < n; ++j)
                if (m.columns[j].kind != column_kind::continuous) out[j] = std::round(out[j]);
            r.values = std::move(out);
            r.objective = obj;
            bound = minimize ? std::min(bound, obj) : std::max(bound, obj);
        }
        r.bound = bound;
        if (mip_rc == 0 && mip_status == GLP_OPT) {
            r.status = status::optimal;
            r.bound = obj;
        } else if (mip_rc == 0 && mip_status == GLP_NOFEAS) {
            r.status = status::infeasible;
            r.message = "no integer solution exists (branch-and-bound exhausted)";
        } else if ((mip_rc == GLP_ETMLIM || mip_rc == GLP_EMIPGAP || mip_rc == GLP_EITLIM) && found) {
            r.status = status::feasible;
            if (mip_rc == GLP_EMIPGAP) r.message = "stopped at the relative gap tolerance";
        } else if (mip_rc == GLP_ETMLIM || mip_rc == GLP_EITLIM) {
            r.status = status::no_solution;
            r.message = "time limit reached before an integer solution was found";
        } else {
            r.status = status::error;
            r.message = "glp_intopt failed with code " + std::to_string(mip_rc);
        }
        if (has_solution(r.status))
            if (auto why = check_solution(m, r.values, 1e-6)) {
                r.status = status::error;
                r.message = "GLPK returned a solution that fails the check: " + *why;
            }
        return finish(std::move(r));
    }

private:
    /// The outcome of glp_interior: optimal; infeasible; or, when it stopped
    /// short of its tolerance (GLPK then keeps its best point), feasible if
    /// that point satisfies the model within 1e-3, else an error.
    static milp_result interior_result(const milp_model& m, int rc, int st, double obj, std::vector<double> x,
                                       milp_result r) {
        if (st == GLP_NOFEAS) {
            r.status = status::infeasible;
            r.message = "LP is infeasible";
            return r;
        }
        if (st != GLP_OPT && st != GLP_INFEAS) {
            r.status = status::error;
            r.message = "glp_interior failed with code " + std::to_string(rc) + " (status " + std::to_string(st) + ")";
            return r;
        }
        // GLPK's interior point often stops on numerical instability close to
        // the optimum (relative gap ~1e-5 on Checkmate's relaxations), at a
        // point whose residuals are of that order: values are clipped to
        // their column bounds, and rows are checked within 1e-3 relative.
        for (std::size_t j = 0; j < x.size(); ++j) {
            const auto [lo, hi] = detail::effective_bounds(m.columns[j]);
            x[j] = std::clamp(x[j], lo, hi);
        }
        if (rc == 0 && st == GLP_OPT) {
            r.status = status::optimal;
            r.bound = obj;
        } else if (auto why = check_solution(m, x, 1e-3)) {
            r.status = status::error;
            r.message = "glp_interior stopped early (code " + std::to_string(rc) + ") at a point that fails the check: " +
                        *why;
            return r;
        } else {
            r.status = status::feasible;
            r.message = rc == GLP_EINSTAB   ? "interior point stopped on numerical instability; its best point is feasible"
                        : rc == GLP_EITLIM  ? "interior point reached its iteration limit; its best point is feasible"
                        : rc == GLP_ENOCVG ? "interior point converged slowly; its best point is feasible"
                                            : "interior point ended with code " + std::to_string(rc);
        }
        r.objective = obj;
        r.values = std::move(x);
        return r;
    }
};

static_assert(SolverLike<glpk_solver>);

} // namespace memplan
