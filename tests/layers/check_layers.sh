#!/usr/bin/env bash
# Checks that the includes of the library point down the layers only.
#
# The table below is the one definition of the layers (docs/architecture.md,
# "Layers", explains it): one line per folder of include/memplan/, lowest
# first, with the folders its headers may include. A folder's detail/
# subfolder belongs to the folder (they may include each other) and obeys its
# line; a header may always include its own folder. Every folder a line names
# must have its own line above it, so the table has no cycle. The umbrella
# header memplan/memplan.hpp may include everything.
#
# Usage: tests/layers/check_layers.sh [REPO_ROOT]   (default: the repository
# this script is in). Prints every forbidden include as
# "file:line: folder -> folder (forbidden): #include <...>" and exits 1 when
# there is any, 0 otherwise. CTest runs it as `repo.layers`.
set -euo pipefail

root="${1:-$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)}"
include_dir="$root/include/memplan"
[[ -d "$include_dir" ]] || { echo "check_layers: no $include_dir" >&2; exit 2; }

# folder          | may include
layers='
core            |
solver          | core
graph           | core
cost            | core graph
nn              | core graph cost
zoo             | core graph cost nn
schedule        | core graph
schedule/order  | core graph schedule solver
alloc           | core solver
check           | core graph schedule alloc
plan            | core graph schedule alloc check
remat           | core graph schedule schedule/order solver plan alloc check
engine          | core graph cost nn schedule plan alloc check remat
engine/cpu      | core graph cost nn schedule plan alloc check remat engine
engine/cuda     | core graph cost nn schedule plan alloc check remat engine
io              | core graph cost nn zoo schedule schedule/order solver plan alloc check remat
'

cd "$include_dir"
mapfile -t headers < <(find . -type f \( -name '*.hpp' -o -name '*.h' -o -name '*.cuh' \) | sed 's|^\./||' | LC_ALL=C sort)
awk -v layers="$layers" '
    # The layer of a folder: the folder without its trailing detail/ parts.
    function layer_of(dir) {
        while (dir ~ /(^|\/)detail$/) sub(/\/?detail$/, "", dir)
        return dir
    }
    function dir_of(path,    d) {
        d = path
        if (d !~ /\//) return "."
        sub(/\/[^\/]*$/, "", d)
        return d
    }
    BEGIN {
        n = split(layers, rows, "\n")
        table_bad = 0
        for (i = 1; i <= n; ++i) {
            if (rows[i] ~ /^[ \t]*$/) continue
            split(rows[i], cols, "|")
            name = cols[1]; gsub(/[ \t]/, "", name)
            if (name in known) { printf "check_layers: folder %s has two lines in the table\n", name; table_bad = 1 }
            m = split(cols[2], deps, " ")
            for (j = 1; j <= m; ++j) {
                if (!(deps[j] in known)) {
                    printf "check_layers: in the table, %s may include %s, which has no line above it\n", name, deps[j]
                    table_bad = 1
                }
                allowed[name SUBSEP deps[j]] = 1
            }
            known[name] = 1
        }
        if (table_bad) exit 2
        bad = 0; edges = 0
    }
    FNR == 1 {
        ++files
        from = layer_of(dir_of(FILENAME))
        if (from != "." && !(from in known)) {
            printf "%s: folder %s is not in the layer table (tests/layers/check_layers.sh)\n", "include/memplan/" FILENAME, from
            bad = 1
        }
    }
    /^[ \t]*#[ \t]*include[ \t]*"/ {
        printf "include/memplan/%s:%d: a quoted include; the library includes its headers as <memplan/...>: %s\n", FILENAME, FNR, $0
        bad = 1
    }
    /^[ \t]*#[ \t]*include[ \t]*<memplan\// {
        target = $0
        sub(/^[^<]*<memplan\//, "", target)
        sub(/>.*$/, "", target)
        to = layer_of(dir_of(target))
        ++edges
        if (from == "." || to == from || (from SUBSEP to) in allowed) next
        if (to != "." && !(to in known))
            why = "not in the layer table"
        else
            why = "forbidden"
        printf "include/memplan/%s:%d: %s -> %s (%s): %s\n", FILENAME, FNR, from, to, why, $0
        bad = 1
    }
    END {
        if (table_bad) exit 2
        if (bad) {
            print "check_layers: includes that do not point down the layers (table: tests/layers/check_layers.sh, docs/architecture.md \"Layers\")"
            exit 1
        }
        printf "check_layers: %d includes of <memplan/...> in %d headers, all down the layers\n", edges, files
    }' "${headers[@]}"
