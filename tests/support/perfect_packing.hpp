// Offset instances with a known perfect packing, for testing and
// benchmarking the exact search on instances it has never seen: tilings of
// [0, H) bytes x [0, T) time (H = 1,048,576) by rectangles, each one buffer,
// in families shaped like MiniMalloc's challenging set (guillotine cuts,
// byte stripes, skylines), optionally with "holes" that keep the load bound
// tight at one time point. Seeded with splitmix64: the same instances on
// every platform.
#pragma once

#include <memplan/alloc/problem.hpp>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <functional>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

namespace memplan::testing::packing {

constexpr std::uint64_t quantum = 1024; // bytes and time steps are multiples of it
constexpr std::uint64_t height_units = 1024; // H = 1,048,576 bytes

/// splitmix64: the same numbers on every platform (std's distributions are not).
struct rng {
    std::uint64_t s;
    std::uint64_t next() {
        std::uint64_t x = (s += 0x9e3779b97f4a7c15ULL);
        x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ULL;
        x = (x ^ (x >> 27)) * 0x94d049bb133111ebULL;
        return x ^ (x >> 31);
    }
    std::uint64_t below(std::uint64_t n) { return n == 0 ? 0 : next() % n; }
    std::uint64_t uniform(std::uint64_t lo, std::uint64_t hi) { return lo + below(hi - lo + 1); } // [lo, hi]
    double unit() { return static_cast<double>(next() >> 11) * 0x1.0p-53; }
    bool coin(double p) { return unit() < p; }
    /// Log-uniform integer in [lo, hi]: heavy tails, like real buffer sizes.
    std::uint64_t log_uniform(std::uint64_t lo, std::uint64_t hi) {
        const double x = std::exp(std::log(static_cast<double>(lo)) +
                                  unit() * (std::log(static_cast<double>(hi) + 1) - std::log(static_cast<double>(lo))));
        return std::clamp<std::uint64_t>(static_cast<std::uint64_t>(x), lo, hi);
    }
};

/// [y0, y1) in byte units x [t0, t1) in time units.
struct rect {
    std::uint64_t y0, y1, t0, t1;
};

/// Guillotine tiling: cut a random rectangle at a random place, across bytes
/// (two buffers with one lifetime, stacked) or across time (one size, back to
/// back), until there are n. Picking the rectangle uniformly gives a few huge
/// buffers and many small ones.
std::vector<rect> guillotine(rng& r, std::size_t n, std::uint64_t horizon) {
    std::vector<rect> rs{{0, height_units, 0, horizon}};
    while (rs.size() < n) {
        const std::size_t i = r.below(rs.size());
        const rect a = rs[i];
        const std::uint64_t h = a.y1 - a.y0, w = a.t1 - a.t0;
        if (h < 2 && w < 2) continue;
        const bool bytes = w < 2 || (h >= 2 && r.coin(0.5));
        rect b = a, c = a;
        if (bytes) {
            b.y1 = c.y0 = a.y0 + r.uniform(1, h - 1);
        } else {
            b.t1 = c.t0 = a.t0 + r.uniform(1, w - 1);
        }
        rs[i] = b;
        rs.push_back(c);
    }
    return rs;
}

/// Byte stripes, each cut in time into back-to-back buffers at times drawn
/// mostly from a shared pool (so neighbours often share a lifetime), then
/// stacked neighbours with the same lifetime merged at random into wider
/// buffers: the packing is not stripe-wise any more.
std::vector<rect> strips(rng& r, std::size_t stripes, std::size_t pool_size, std::uint64_t horizon) {
    std::vector<std::uint64_t> ys{0, height_units};
    while (ys.size() < stripes + 1) {
        const std::uint64_t y = r.uniform(1, height_units - 1);
        if (std::find(ys.begin(), ys.end(), y) == ys.end()) ys.push_back(y);
    }
    std::sort(ys.begin(), ys.end());
    std::vector<std::uint64_t> pool;
    for (std::size_t k = 0; k < pool_size; ++k) pool.push_back(r.uniform(1, horizon - 1));
    std::vector<rect> rs;
    for (std::size_t s = 0; s + 1 < ys.size(); ++s) {
        std::vector<std::uint64_t> ts{0, horizon};
        for (auto t : pool)
            if (r.coin(0.5)) ts.push_back(t);
        for (std::uint64_t k = r.below(3); k > 0; --k) ts.push_back(r.uniform(1, horizon - 1));
        std::sort(ts.begin(), ts.end());
        ts.erase(std::unique(ts.begin(), ts.end()), ts.end());
        for (std::size_t k = 0; k + 1 < ts.size(); ++k) rs.push_back({ys[s], ys[s + 1], ts[k], ts[k + 1]});
    }
    // Runs of stacked rectangles with one lifetime, in byte order.
    std::sort(rs.begin(), rs.end(), [](const rect& a, const rect& b) {
        return std::tie(a.t0, a.t1, a.y0) < std::tie(b.t0, b.t1, b.y0);
    });
    std::vector<rect> merged;
    for (const rect& a : rs) {
        if (!merged.empty()) {
            rect& m = merged.back();
            if (m.t0 == a.t0 && m.t1 == a.t1 && m.y1 == a.y0 && r.coin(0.6)) {
                m.y1 = a.y1;
                continue;
            }
        }
        merged.push_back(a);
    }
    return merged;
}

/// How the skyline generator draws a buffer: a mixture of (weight, size
/// range, lifetime range), each log-uniform, in units.
struct shape {
    struct part {
        double weight;
        std::uint64_t size_lo, size_hi, life_lo, life_hi;
    };
    std::vector<part> parts;
};

/// Gravity tiling (how a packer fills the skyline): take the lowest segment
/// of the skyline, stand a rectangle of drawn size and lifetime on it (at its
/// left end, its right end or anywhere, clipped to the segment and to H),
/// until the skyline is flat at H. Not guillotine in general.
std::vector<rect> skyline(rng& r, const shape& sh, std::uint64_t horizon) {
    struct seg {
        std::uint64_t t0, t1, level;
    };
    std::vector<seg> sky{{0, horizon, 0}};
    std::vector<rect> rs;
    double total = 0;
    for (const auto& p : sh.parts) total += p.weight;
    for (;;) {
        std::size_t i = 0;
        for (std::size_t k = 1; k < sky.size(); ++k)
            if (sky[k].level < sky[i].level) i = k;
        const seg s = sky[i];
        if (s.level >= height_units) break;
        double x = r.unit() * total;
        const shape::part* p = &sh.parts.back();
        for (const auto& q : sh.parts) {
            if (x < q.weight) {
                p = &q;
                break;
            }
            x -= q.weight;
        }
        const std::uint64_t w = s.t1 - s.t0, room = height_units - s.level;
        std::uint64_t life = std::min(w, r.log_uniform(p->life_lo, p->life_hi));
        std::uint64_t a = s.t0;
        switch (r.below(3)) {
        case 0: break;
        case 1: a = s.t1 - life; break;
        default: a = s.t0 + r.below(w - life + 1);
        }
        // No slivers: a leftover of the valley narrower than the shortest
        // lifetime is taken in, and a top close to a neighbour's level (or to
        // H) snaps to it, closing the step. Else the count explodes.
        if (a - s.t0 < p->life_lo) {
            life += a - s.t0;
            a = s.t0;
        }
        if (s.t1 - (a + life) < p->life_lo) life = s.t1 - a;
        std::uint64_t size = std::min(room, r.log_uniform(p->size_lo, p->size_hi));
        std::vector<std::uint64_t> targets{height_units};
        if (a == s.t0 && i > 0) targets.push_back(sky[i - 1].level);
        if (a + life == s.t1 && i + 1 < sky.size()) targets.push_back(sky[i + 1].level);
        const std::uint64_t tol = std::max(p->size_lo, size / 4);
        for (auto t : targets) {
            const std::uint64_t top = s.level + size, d = t > top ? t - top : top - t;
            if (d <= tol) {
                size = t - s.level;
                break;
            }
        }
        rs.push_back({s.level, s.level + size, a, a + life});
        std::vector<seg> repl;
        if (a > s.t0) repl.push_back({s.t0, a, s.level});
        repl.push_back({a, a + life, s.level + size});
        if (a + life < s.t1) repl.push_back({a + life, s.t1, s.level});
        sky.erase(sky.begin() + static_cast<std::ptrdiff_t>(i));
        sky.insert(sky.begin() + static_cast<std::ptrdiff_t>(i), repl.begin(), repl.end());
        std::vector<seg> flat; // neighbours at one level are one segment
        for (const seg& g : sky) {
            if (!flat.empty() && flat.back().level == g.level) flat.back().t1 = g.t1;
            else flat.push_back(g);
        }
        sky = std::move(flat);
    }
    return rs;
}

/// Deletes each rectangle that misses time t* with probability q: the load at
/// t* stays H (the bound stays tight), elsewhere the tiling gets gaps.
void punch_holes(rng& r, std::vector<rect>& rs, double q, std::uint64_t horizon) {
    const std::uint64_t star = r.below(horizon);
    std::erase_if(rs, [&](const rect& a) { return (star < a.t0 || star >= a.t1) && r.coin(q); });
}

struct instance {
    alloc_problem problem;
    std::vector<std::uint64_t> witness; ///< the known packing, offsets in bytes
};

/// Rectangles to buffers in shuffled order (so item order tells nothing).
instance to_instance(rng& r, std::vector<rect> rs) {
    for (std::size_t i = rs.size(); i > 1; --i) std::swap(rs[i - 1], rs[r.below(i)]);
    instance in;
    in.problem.capacity = height_units * quantum;
    for (const rect& a : rs) {
        in.problem.items.push_back({(a.y1 - a.y0) * quantum, a.t0 * quantum, a.t1 * quantum});
        in.witness.push_back(a.y0 * quantum);
    }
    return in;
}

struct family {
    const char* name;
    const char* what;
    std::size_t min_buffers, max_buffers;
    std::function<std::vector<rect>(rng&)> tiles;
};

/// Instance `seed` of a family: the first draw whose buffer count lies in the
/// family's range (deterministic: attempts are seeded too).
instance generate(const family& f, std::uint64_t seed) {
    std::uint64_t name_hash = 1469598103934665603ULL; // FNV-1a
    for (const char* c = f.name; *c; ++c) name_hash = (name_hash ^ static_cast<unsigned char>(*c)) * 1099511628211ULL;
    for (std::uint64_t attempt = 0;; ++attempt) {
        rng r{name_hash ^ (seed * 0x9e3779b97f4a7c15ULL) ^ (attempt << 48)};
        auto rs = f.tiles(r);
        if (rs.size() >= f.min_buffers && rs.size() <= f.max_buffers) return to_instance(r, std::move(rs));
    }
}

} // namespace memplan::testing::packing
