// Writing output files so that a reader never sees half of one: the content
// goes to a temporary file in the same directory (same file system), is
// flushed to disk, then renamed over the target, which POSIX makes atomic.
// On any failure the temporary is removed and the target is left untouched.
#pragma once

#include <memplan/core/error.hpp>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <random>
#include <string>
#include <string_view>
#include <system_error>

#if defined(__unix__) || defined(__APPLE__)
#include <unistd.h>
#endif

namespace memplan {

namespace detail {

/// A name for the temporary that no concurrent writer in this or another
/// process picks: random bits, the clock and a process-wide counter.
inline std::filesystem::path temporary_sibling(const std::filesystem::path& target) {
    static std::atomic<unsigned long long> counter{0};
    std::random_device rd;
    const unsigned long long salt = (static_cast<unsigned long long>(rd()) << 32) ^ rd() ^
                                    static_cast<unsigned long long>(
                                        std::chrono::steady_clock::now().time_since_epoch().count()) ^
                                    (counter.fetch_add(1) * 0x9e3779b97f4a7c15ULL);
    char suffix[32];
    std::snprintf(suffix, sizeof suffix, "%016llx", salt);
    auto tmp = target;
    // Appended piece by piece: GCC 12 warns falsely (-Wrestrict) on "literal" + std::string&&.
    std::string name = ".";
    name += target.filename().string();
    name += ".tmp-";
    name += suffix;
    tmp.replace_filename(name);
    return tmp;
}

} // namespace detail

/// Writes `content` to `path` atomically (temporary file, flush, rename).
/// Throws `memplan::error` ("io") naming the path when any step fails; the
/// temporary file is removed and an existing `path` is left as it was.
inline void write_file_atomically(const std::filesystem::path& path, std::string_view content) {
    if (path.empty() || !path.has_filename())
        throw error("io", "cannot write '" + path.string() + "': not a file name");
    const auto tmp = detail::temporary_sibling(path);
    auto fail = [&](const std::string& what) {
        std::error_code ignored;
        std::filesystem::remove(tmp, ignored);
        throw error("io", "cannot write '" + path.string() + "': " + what);
    };
    std::FILE* f = std::fopen(tmp.string().c_str(), "wbx"); // x: never reuse an existing file
    if (!f) fail("cannot create temporary file '" + tmp.string() + "'");
    const bool written = content.empty() || std::fwrite(content.data(), 1, content.size(), f) == content.size();
    bool flushed = written && std::fflush(f) == 0;
#if defined(__unix__) || defined(__APPLE__)
    flushed = flushed && ::fsync(::fileno(f)) == 0;
#endif
    const bool closed = std::fclose(f) == 0;
    if (!written) fail("short write to '" + tmp.string() + "'");
    if (!flushed || !closed) fail("cannot flush '" + tmp.string() + "'");
    std::error_code ec;
    std::filesystem::rename(tmp, path, ec);
    if (ec) fail("cannot rename '" + tmp.string() + "' over it: " + ec.message());
}

} // namespace memplan
