"""What Inductor's buffer pool does to memplan's plan inside torch.compile: the peak against the budget, and the time.

    build/venv/bin/python bench/torch/buffer_pool.py [--fractions 0.5] [--repeats 15] [--out FILE] [MODEL ...]

Inductor's generated code keeps a dead buffer for a later allocation of its size (``allow_buffer_reuse``) where
holding it does not raise Inductor's estimate of the graph's peak; ``memplan_torch.Partitioner`` turns that pool
off by default (``pool_guard``). For each model (compile_coverage.py's names) and fraction f, in a process of its
own (``common.isolated``), five compiles of the training step, each from empty caches:

- ``memplan``: ``Partitioner(f)`` as it comes (the pool off);
- ``memplan again``: the same, compiled again: the step times of two identical arms differ by the machine's
  noise, the spread a difference between arms must exceed;
- ``memplan, pool``: ``Partitioner(f, pool_guard=False)`` with Inductor's pool on;
- ``pytorch, pool`` and ``pytorch, no pool``: PyTorch's own partitioner (min-cut, no memory budget) with the pool
  on (PyTorch's default) and off, what the pool does without memplan.

Each arm: the step's measured CPU peak (``probe.peak_of``), the budget memplan planned for (the largest region's,
in bytes) and whether the peak is at or below it, and the median step time over ``--repeats`` steps after a
warm-up, the arms interleaved step by step."""
from __future__ import annotations

import argparse
import os
import statistics
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)

from common import emit, isolated, log, row_printer, table_parser  # noqa: E402
from compile_coverage import compiled, loss_of, model_case  # noqa: E402


MODELS = ["hf:llama", "hf:t5", "hf:mixtral", "resnet50"]
ARMS = ["memplan", "memplan again", "memplan, pool", "pytorch, pool", "pytorch, no pool"]


def one(name: str, f: float, repeats: int) -> dict:
    from memplan_torch import Partitioner
    from memplan_torch.probe import peak_of, storage_bytes
    model, inputs, targets, loss_fn, label = model_case(name)
    loss = loss_of(loss_fn)
    resident = storage_bytes(list(model.parameters()) + list(model.buffers()) + list(inputs) + list(targets))
    arms = {}
    for arm in ARMS:
        log(f"{name} f={f}: compiling ({arm})")
        pool = arm.endswith(", pool")
        part = Partitioner(f, pool_guard=not pool) if arm.startswith("memplan") else None
        fn, _, _ = compiled(model, loss, inputs, targets, part, allow_buffer_reuse=pool)
        step = (lambda fn=fn: fn(inputs, targets).backward())
        model.zero_grad(set_to_none=True)
        peak = peak_of(step, resident)[0]
        model.zero_grad(set_to_none=True)
        budget = max(part.partitions, key=lambda p: p.report["store_all"]).budget if part else None
        arms[arm] = {"step": step, "peak": peak, "budget": budget,
                     "regions": len(part.partitions) if part else None, "times": []}
    for a in arms.values():  # warm-up
        a["step"]()
        model.zero_grad(set_to_none=True)
    for _ in range(repeats):
        for a in arms.values():
            t = time.perf_counter()
            a["step"]()
            a["times"].append(time.perf_counter() - t)
            model.zero_grad(set_to_none=True)
    return {"label": label, "arms": {k: {"peak": a["peak"], "budget": a["budget"], "regions": a["regions"],
                                         "time": statistics.median(a["times"])} for k, a in arms.items()}}


def main() -> None:
    ap = table_parser(MODELS)
    ap.add_argument("--fractions", default="0.5")
    ap.add_argument("--repeats", type=int, default=15)
    ap.add_argument("--one", type=float, help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.one is not None:
        emit(one(args.models[0], args.one, args.repeats))
        return
    put = row_printer(["model", "f", "arm", "regions", "budget MiB", "peak MiB", "peak <= budget", "step ms",
                       "note"], args.out)
    mib = lambda b: f"{b / 2**20:.2f}"  # noqa: E731
    for name in args.models:
        for f in [float(x) for x in args.fractions.split(",")]:
            try:
                r = isolated(os.path.abspath(__file__), [name, "--one", str(f), "--repeats", str(args.repeats)])
            except RuntimeError as e:
                put([name, str(f), "-", "-", "-", "-", "-", "-", str(e)[:200]])
                continue
            a = r["arms"]
            spread = abs(a["memplan again"]["time"] / a["memplan"]["time"] - 1)
            for arm in ARMS:
                x = a[arm]
                within = "-" if x["budget"] is None or x["regions"] != 1 else (
                    "yes" if x["peak"] <= x["budget"] else f"NO (+{mib(x['peak'] - x['budget'])} MiB)")
                note = ""
                if arm == "memplan again":
                    note = f"spread of the two memplan arms: {100 * spread:.1f} %"
                elif arm == "memplan, pool":
                    note = f"{100 * (x['time'] / a['memplan']['time'] - 1):+.1f} % vs memplan"
                elif arm == "pytorch, no pool":
                    note = f"{100 * (x['time'] / a['pytorch, pool']['time'] - 1):+.1f} % vs pytorch, pool"
                put([r["label"], str(f), arm, str(x["regions"] or "-"),
                     mib(x["budget"]) if x["budget"] else "-", mib(x["peak"]), within,
                     f"{1e3 * x['time']:.1f}", note])


if __name__ == "__main__":
    main()
