// A small, dependency-free SVG line plot: axes with "nice" ticks (steps of
// 1, 2 or 5 times a power of ten, Heckbert's Graphics Gems labelling idea),
// axis labels, a title, one polyline with point markers per series and a
// legend. Enough for a person to read a memory / overhead curve in a browser;
// written atomically like every output file.
#pragma once

#include <memplan/core/error.hpp>
#include <memplan/io/atomic_file.hpp>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <limits>
#include <optional>
#include <string>
#include <utility>
#include <vector>

namespace memplan {

struct svg_series {
    std::string name;                              ///< shown in the legend
    std::vector<std::pair<double, double>> points; ///< (x, y), drawn in the given order
    std::string color;                             ///< CSS colour; empty: from a fixed palette
};

struct svg_plot {
    std::string title;
    std::string x_label;
    std::string y_label;
    std::vector<svg_series> series;
    int width = 720;
    int height = 450;
    /// Axis ranges; unset: from the data, widened to whole ticks.
    std::optional<std::pair<double, double>> x_range, y_range;
};

namespace detail {

inline std::string svg_escape(std::string_view s) {
    std::string out;
    out.reserve(s.size());
    for (char c : s) {
        switch (c) {
        case '&': out += "&amp;"; break;
        case '<': out += "&lt;"; break;
        case '>': out += "&gt;"; break;
        case '"': out += "&quot;"; break;
        case '\'': out += "&apos;"; break;
        default:
            // XML 1.0 forbids most control characters even escaped.
            if (static_cast<unsigned char>(c) >= 0x20 || c == '\t' || c == '\n') out += c;
        }
    }
    return out;
}

inline std::string svg_number(double v) {
    char buf[32];
    std::snprintf(buf, sizeof buf, "%.2f", v);
    return buf;
}

/// A tick step of 1, 2 or 5 x 10^k giving about `target` intervals over `span`.
inline double nice_step(double span, int target) {
    if (!(span > 0)) return 1.0;
    const double raw = span / std::max(1, target);
    const double mag = std::pow(10.0, std::floor(std::log10(raw)));
    const double f = raw / mag;
    const double nice = f <= 1.0 ? 1.0 : f <= 2.0 ? 2.0 : f <= 5.0 ? 5.0 : 10.0;
    return nice * mag;
}

/// A tick label without trailing zeros ("0.25", "10", "-5").
inline std::string tick_label(double v, double step) {
    if (std::abs(v) < step * 1e-9) v = 0; // no "-0"
    char buf[48];
    if (step < 1e-4 || step >= 1e7) { // very small or large: scientific, short
        std::snprintf(buf, sizeof buf, "%.3g", v);
        return buf;
    }
    const int decimals = step >= 1 ? 0 : std::min(6, static_cast<int>(std::ceil(-std::log10(step) - 1e-9)));
    std::snprintf(buf, sizeof buf, "%.*f", decimals, v);
    return buf;
}

struct svg_axis {
    double lo = 0, hi = 1, step = 1;
};

inline svg_axis make_axis(double lo, double hi, const std::optional<std::pair<double, double>>& fixed) {
    if (fixed) {
        lo = fixed->first;
        hi = fixed->second;
    }
    if (!std::isfinite(lo) || !std::isfinite(hi)) lo = 0, hi = 1;
    if (hi < lo) std::swap(lo, hi);
    if (hi - lo <= std::abs(hi) * 1e-12) { // one value: a range around it
        const double pad = lo == 0 ? 1.0 : std::abs(lo) * 0.1;
        lo -= pad;
        hi += pad;
    }
    svg_axis a;
    a.step = nice_step(hi - lo, 6);
    if (fixed) {
        a.lo = lo;
        a.hi = hi;
    } else {
        a.lo = std::floor(lo / a.step) * a.step;
        a.hi = std::ceil(hi / a.step) * a.step;
    }
    return a;
}

/// The tick values inside the axis range (a tolerance for rounding).
inline std::vector<double> ticks(const svg_axis& a) {
    std::vector<double> v;
    const double eps = a.step * 1e-9;
    const auto k0 = static_cast<long long>(std::ceil((a.lo - eps) / a.step));
    const auto k1 = static_cast<long long>(std::floor((a.hi + eps) / a.step));
    for (long long k = k0; k <= k1 && v.size() < 200; ++k) v.push_back(static_cast<double>(k) * a.step);
    return v;
}

inline const char* svg_palette(std::size_t i) {
    static constexpr const char* colors[] = {"#1f77b4", "#d62728", "#2ca02c", "#ff7f0e",
                                             "#9467bd", "#8c564b", "#e377c2", "#17becf"};
    return colors[i % std::size(colors)];
}

} // namespace detail

/// The plot as an SVG document (UTF-8, standalone). Points with a
/// non-finite coordinate are skipped.
inline std::string svg_plot_string(const svg_plot& p) {
    using detail::svg_escape;
    using detail::svg_number;
    if (p.width < 200 || p.height < 150)
        throw error("io", "svg plot '" + p.title + "': width and height must be at least 200 x 150");
    double x_lo = std::numeric_limits<double>::infinity(), x_hi = -x_lo, y_lo = x_lo, y_hi = -x_lo;
    for (const auto& s : p.series)
        for (auto [x, y] : s.points) {
            if (!std::isfinite(x) || !std::isfinite(y)) continue;
            x_lo = std::min(x_lo, x), x_hi = std::max(x_hi, x);
            y_lo = std::min(y_lo, y), y_hi = std::max(y_hi, y);
        }
    const auto xa = detail::make_axis(x_lo, x_hi, p.x_range);
    const auto ya = detail::make_axis(y_lo, y_hi, p.y_range);

    const double W = p.width, H = p.height;
    const double left = 72, right = 24, top = p.title.empty() ? 24 : 44, bottom = 56;
    const double pw = W - left - right, ph = H - top - bottom;
    auto sx = [&](double x) { return left + (x - xa.lo) / (xa.hi - xa.lo) * pw; };
    auto sy = [&](double y) { return top + ph - (y - ya.lo) / (ya.hi - ya.lo) * ph; };

    std::string s;
    s += "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n";
    s += "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"" + std::to_string(p.width) + "\" height=\"" +
         std::to_string(p.height) + "\" viewBox=\"0 0 " + std::to_string(p.width) + " " + std::to_string(p.height) +
         "\" font-family=\"sans-serif\" font-size=\"12\">\n";
    s += "<rect x=\"0\" y=\"0\" width=\"" + std::to_string(p.width) + "\" height=\"" + std::to_string(p.height) +
         "\" fill=\"white\"/>\n";
    if (!p.title.empty())
        s += "<text x=\"" + svg_number(W / 2) + "\" y=\"24\" text-anchor=\"middle\" font-size=\"15\">" +
             svg_escape(p.title) + "</text>\n";

    // Grid lines and tick labels, by tick index (no drift from repeated adds).
    const auto x_ticks = detail::ticks(xa), y_ticks = detail::ticks(ya);
    s += "<g stroke=\"#dddddd\" stroke-width=\"1\">\n";
    for (double v : x_ticks)
        s += "<line x1=\"" + svg_number(sx(v)) + "\" y1=\"" + svg_number(top) + "\" x2=\"" + svg_number(sx(v)) +
             "\" y2=\"" + svg_number(top + ph) + "\"/>\n";
    for (double v : y_ticks)
        s += "<line x1=\"" + svg_number(left) + "\" y1=\"" + svg_number(sy(v)) + "\" x2=\"" + svg_number(left + pw) +
             "\" y2=\"" + svg_number(sy(v)) + "\"/>\n";
    s += "</g>\n";
    s += "<g fill=\"#333333\">\n";
    for (double v : x_ticks)
        s += "<text x=\"" + svg_number(sx(v)) + "\" y=\"" + svg_number(top + ph + 18) + "\" text-anchor=\"middle\">" +
             svg_escape(detail::tick_label(v, xa.step)) + "</text>\n";
    for (double v : y_ticks)
        s += "<text x=\"" + svg_number(left - 8) + "\" y=\"" + svg_number(sy(v) + 4) + "\" text-anchor=\"end\">" +
             svg_escape(detail::tick_label(v, ya.step)) + "</text>\n";
    s += "</g>\n";
    s += "<rect x=\"" + svg_number(left) + "\" y=\"" + svg_number(top) + "\" width=\"" + svg_number(pw) +
         "\" height=\"" + svg_number(ph) + "\" fill=\"none\" stroke=\"#333333\"/>\n";
    if (!p.x_label.empty())
        s += "<text x=\"" + svg_number(left + pw / 2) + "\" y=\"" + svg_number(H - 14) +
             "\" text-anchor=\"middle\">" + svg_escape(p.x_label) + "</text>\n";
    if (!p.y_label.empty())
        s += "<text x=\"18\" y=\"" + svg_number(top + ph / 2) + "\" text-anchor=\"middle\" transform=\"rotate(-90 18 " +
             svg_number(top + ph / 2) + ")\">" + svg_escape(p.y_label) + "</text>\n";

    // Series, clipped to the plot area when the caller fixed a range.
    s += "<defs><clipPath id=\"plot-area\"><rect x=\"" + svg_number(left) + "\" y=\"" + svg_number(top) +
         "\" width=\"" + svg_number(pw) + "\" height=\"" + svg_number(ph) + "\"/></clipPath></defs>\n";
    for (std::size_t i = 0; i < p.series.size(); ++i) {
        const auto& ser = p.series[i];
        const std::string color = ser.color.empty() ? detail::svg_palette(i) : svg_escape(ser.color);
        std::string pts;
        for (auto [x, y] : ser.points)
            if (std::isfinite(x) && std::isfinite(y))
                pts += (pts.empty() ? "" : " ") + svg_number(sx(x)) + "," + svg_number(sy(y));
        s += "<g class=\"series\" clip-path=\"url(#plot-area)\">\n<title>" + svg_escape(ser.name) + "</title>\n";
        if (!pts.empty())
            s += "<polyline fill=\"none\" stroke=\"" + color + "\" stroke-width=\"2\" points=\"" + pts + "\"/>\n";
        for (auto [x, y] : ser.points)
            if (std::isfinite(x) && std::isfinite(y))
                s += "<circle cx=\"" + svg_number(sx(x)) + "\" cy=\"" + svg_number(sy(y)) + "\" r=\"3\" fill=\"" +
                     color + "\"/>\n";
        s += "</g>\n";
    }
    // Legend, top right inside the plot area, sized to the longest name.
    if (!p.series.empty()) {
        std::size_t longest = 0;
        for (const auto& ser : p.series) longest = std::max(longest, ser.name.size());
        const double lw = 40 + 7.0 * static_cast<double>(std::min<std::size_t>(longest, 60));
        const double lx = std::max(left + 10, left + pw - lw - 4), ly = top + 10;
        s += "<g class=\"legend\">\n<rect x=\"" + svg_number(lx - 6) + "\" y=\"" + svg_number(ly - 4) +
             "\" width=\"" + svg_number(lw) + "\" height=\"" +
             svg_number(18.0 * static_cast<double>(p.series.size()) + 6) +
             "\" fill=\"white\" fill-opacity=\"0.85\" stroke=\"#bbbbbb\"/>\n";
        for (std::size_t i = 0; i < p.series.size(); ++i) {
            const auto& ser = p.series[i];
            const std::string color = ser.color.empty() ? detail::svg_palette(i) : svg_escape(ser.color);
            const double y = ly + 18.0 * static_cast<double>(i) + 9;
            s += "<line x1=\"" + svg_number(lx) + "\" y1=\"" + svg_number(y) + "\" x2=\"" + svg_number(lx + 20) +
                 "\" y2=\"" + svg_number(y) + "\" stroke=\"" + color + "\" stroke-width=\"2\"/>\n";
            s += "<text x=\"" + svg_number(lx + 26) + "\" y=\"" + svg_number(y + 4) + "\">" + svg_escape(ser.name) +
                 "</text>\n";
        }
        s += "</g>\n";
    }
    s += "</svg>\n";
    return s;
}

/// Writes the plot to `path` atomically; throws `memplan::error` ("io")
/// naming the path on failure.
inline void write_svg_plot(const std::filesystem::path& path, const svg_plot& p) {
    write_file_atomically(path, svg_plot_string(p));
}

} // namespace memplan
