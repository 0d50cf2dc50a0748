// Writing output files so that a reader never sees half of one: the content
// goes to a temporary file in the same directory (same file system), is
// flushed to disk, then renamed over the target, which POSIX makes atomic.
// On any failure the temporary is removed and the target is left untouched.
// A command with several outputs writes them all or none. Links are followed
// (the link stays), devices and FIFOs are written through, never replaced.
#pragma once

#include <memplan/core/error.hpp>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <memory>
#include <random>
#include <string>
#include <string_view>
#include <system_error>
#include <utility>
#include <vector>

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

/// Where writing `path` goes, and how: through a chain of symbolic links to
/// the file they name (the links stay links), straight through for a
/// character device or a FIFO (`/dev/null`, `/dev/stdout`, a pipe: renaming
/// over those would replace them with a regular file), by temporary and
/// rename for a regular file or a new one. Anything else is refused.
struct write_target {
    std::filesystem::path path;
    bool stream = false; ///< write through instead of rename
};

inline write_target resolve_write_target(const std::filesystem::path& path) {
    if (path.empty() || !path.has_filename())
        throw error("io", "cannot write '" + path.string() + "': not a file name");
    write_target t{path, false};
    std::error_code ec;
    for (int hops = 0;; ++hops) {
        const auto st = std::filesystem::symlink_status(t.path, ec);
        if (ec || st.type() == std::filesystem::file_type::not_found) return t; // a new file
        if (st.type() != std::filesystem::file_type::symlink) break;
        if (hops == 40) throw error("io", "cannot write '" + path.string() + "': too many levels of symbolic links");
        auto next = std::filesystem::read_symlink(t.path, ec);
        if (ec) throw error("io", "cannot write '" + path.string() + "': cannot read link '" + t.path.string() + "'");
        t.path = next.is_absolute() ? next : t.path.parent_path() / next;
    }
    switch (std::filesystem::status(t.path, ec).type()) {
    case std::filesystem::file_type::regular: return t;
    case std::filesystem::file_type::character:
    case std::filesystem::file_type::fifo: t.stream = true; return t;
    case std::filesystem::file_type::directory:
        throw error("io", "cannot write '" + path.string() + "': it is a directory");
    default:
        throw error("io", "cannot write '" + path.string() + "': it is neither a regular file nor a character "
                                                             "device or FIFO (memplan writes nothing to it)");
    }
}

/// Writes `content` straight to the device or FIFO `t.path`.
inline void write_through(const std::filesystem::path& shown, const write_target& t, std::string_view content) {
    std::FILE* f = std::fopen(t.path.string().c_str(), "wb");
    if (!f) throw error("io", "cannot write '" + shown.string() + "': cannot open it");
    const bool written = content.empty() || std::fwrite(content.data(), 1, content.size(), f) == content.size();
    const bool flushed = written && std::fflush(f) == 0;
    const bool closed = std::fclose(f) == 0;
    if (!written || !flushed || !closed) throw error("io", "cannot write '" + shown.string() + "': short write");
}

/// A temporary sibling of a target, written and flushed; `commit` renames it
/// over the target, the destructor removes it when it was not committed.
class staged_file {
public:
    staged_file(std::filesystem::path shown, std::filesystem::path target, std::string_view content)
        : shown_(std::move(shown)), target_(std::move(target)), tmp_(temporary_sibling(target_)) {
        std::FILE* f = std::fopen(tmp_.string().c_str(), "wbx"); // x: never reuse an existing file
        if (!f) fail("cannot create temporary file '" + tmp_.string() + "'");
        created_ = true;
        const bool written = content.empty() || std::fwrite(content.data(), 1, content.size(), f) == content.size();
        bool flushed = written && std::fflush(f) == 0;
#if defined(__unix__) || defined(__APPLE__)
        flushed = flushed && ::fsync(::fileno(f)) == 0;
#endif
        const bool closed = std::fclose(f) == 0;
        if (!written) fail("short write to '" + tmp_.string() + "'");
        if (!flushed || !closed) fail("cannot flush '" + tmp_.string() + "'");
    }
    staged_file(const staged_file&) = delete;
    staged_file& operator=(const staged_file&) = delete;
    ~staged_file() { discard(); }

    void commit() {
        std::error_code ec;
        std::filesystem::rename(tmp_, target_, ec);
        if (ec) fail("cannot rename '" + tmp_.string() + "' over it: " + ec.message());
        created_ = false;
    }

private:
    void discard() noexcept {
        if (!created_) return;
        std::error_code ignored;
        std::filesystem::remove(tmp_, ignored);
        created_ = false;
    }
    [[noreturn]] void fail(const std::string& what) {
        discard();
        throw error("io", "cannot write '" + shown_.string() + "': " + what);
    }

    std::filesystem::path shown_, target_, tmp_;
    bool created_ = false;
};

} // namespace detail

/// Writes every `(path, content)` pair or none: regular files go to flushed
/// temporaries first, and only when all of them (and every device target)
/// are written are they renamed over their targets. Throws `memplan::error`
/// ("io") naming the path at fault; temporaries are removed and existing
/// files left as they were. A target that is a symbolic link is written at
/// the file it names; a character device or FIFO (`-o /dev/null`) is written
/// through; other kinds of file are refused.
inline void write_files_atomically(const std::vector<std::pair<std::filesystem::path, std::string>>& files) {
    std::vector<detail::write_target> targets;
    targets.reserve(files.size());
    for (const auto& [path, content] : files) targets.push_back(detail::resolve_write_target(path));
    std::vector<std::unique_ptr<detail::staged_file>> staged;
    for (std::size_t i = 0; i < files.size(); ++i)
        if (!targets[i].stream)
            staged.push_back(std::make_unique<detail::staged_file>(files[i].first, targets[i].path, files[i].second));
    for (std::size_t i = 0; i < files.size(); ++i)
        if (targets[i].stream) detail::write_through(files[i].first, targets[i], files[i].second);
    for (auto& f : staged) f->commit();
}

/// Throws `memplan::error` ("io") now when `path` cannot be written later:
/// a directory, a kind of file memplan does not write, or a folder that does
/// not exist. Commands call it before long work, so that a bad output name
/// costs no planning time. (It cannot promise the write: disks fill up.)
inline void check_output_path(const std::filesystem::path& path) {
    const auto target = detail::resolve_write_target(path);
    if (target.stream) return;
    const auto dir = target.path.has_parent_path() ? target.path.parent_path() : std::filesystem::path(".");
    std::error_code ec;
    if (!std::filesystem::is_directory(dir, ec))
        throw error("io", "cannot write '" + path.string() + "': folder '" + dir.string() + "' does not exist");
}

/// Writes `content` to `path` atomically (temporary file, flush, rename);
/// see `write_files_atomically` for links and devices. Throws
/// `memplan::error` ("io") naming the path when any step fails; the
/// temporary file is removed and an existing `path` is left as it was.
inline void write_file_atomically(const std::filesystem::path& path, std::string_view content) {
    const auto target = detail::resolve_write_target(path);
    if (target.stream) return detail::write_through(path, target, content);
    detail::staged_file(path, target.path, content).commit();
}

} // namespace memplan
