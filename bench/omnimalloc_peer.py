"""The optional peer of bench_alloc_large: runs omnimalloc's allocators on one
offset CSV (id,lower,upper,size; lifetimes half-open) and prints one line per
allocator: "<name> <height> <seconds>", or "<name> error <message>".

    python3 bench/omnimalloc_peer.py TRACE.csv greedy_by_size,omni

omnimalloc (pip install omnimalloc) is never a dependency of memplan's build
or tests; bench_alloc_large calls this only when it can import it. Heights
are recomputed here from the offsets omnimalloc returns; bench_alloc_large
checks them against its own lower bound.
"""

import csv
import sys
import time


def main() -> int:
    if len(sys.argv) != 3:
        print(__doc__, file=sys.stderr)
        return 2
    import omnimalloc
    from omnimalloc import Allocation

    with open(sys.argv[1], newline="") as f:
        rows = list(csv.DictReader(f))
    allocs = [
        Allocation(int(r["id"]), int(r["size"]), int(r["lower"]), int(r["upper"]))
        for r in rows
        if int(r["size"]) > 0 and int(r["lower"]) < int(r["upper"])
    ]
    for name in sys.argv[2].split(","):
        t0 = time.perf_counter()
        try:
            placed = omnimalloc.allocate(allocs, name, validate=True)
        except Exception as e:  # a peer's failure is a row, not the end of the table
            print(f"{name} error {type(e).__name__}: {e}".replace("\n", " "), flush=True)
            continue
        seconds = time.perf_counter() - t0
        height = max((a.offset + a.size for a in placed), default=0)
        print(f"{name} {height} {seconds:.3f}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
