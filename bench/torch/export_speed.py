"""How long `memplan_torch.export` takes, per model, as it is and as it was: the first export in a fresh process.

    build/venv/bin/python bench/torch/export_speed.py [--repeats 2] [--out FILE] [MODEL ...]

Two ways are run side by side, alternating, each export in a process of its own (``common.isolated``):

- ``fake`` (what ``export`` does): the step is traced on fake stand-ins of the model's tensors
  (``export.trace_fake``: no kernel runs while the graph is recorded), workspaces measured on one run (CPU);
- ``real`` (what it did before): the step is traced on the model's real tensors (``export.trace``, still the
  fallback for a step whose shapes depend on its data: every kernel of forward and backward runs in each of
  aot_autograd's two trace passes), workspaces measured on one run after a warm-up run.

Each row: wall seconds of the whole ``export`` call (median of ``--repeats`` fresh processes per way), of the
trace, of the workspace measurement, the CPU seconds of the call, and whether both ways wrote the same graph
(JSON compared with sorted keys). ``--plan`` adds ``memplan plan --budget 50% --time-limit 1`` on the exported
graph (wall seconds of the command, its planning time limit included, and its outcome: a plan, the budget proven
infeasible, or no plan found within the second). Models: coverage.py's sixteen (tiny
Hugging Face configurations, torchvision at batch 2 and small images; ``hf:llama`` is a 2-layer Llama at 2 x 128
tokens), plus ``resnet50-b8`` (batch 8, 224x224)."""
from __future__ import annotations

import argparse
import hashlib
import json
import os
import statistics
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)

from common import emit, isolated, log, row_printer, table_parser  # noqa: E402
from coverage import MODELS as COVERAGE, make  # noqa: E402

import torch  # noqa: E402
import torchvision  # noqa: E402

import memplan_torch as mt  # noqa: E402

EXTRA = ["resnet50-b8"]
MODELS = EXTRA + COVERAGE
WAYS = ("fake", "real")


def build(name: str):
    """(model, inputs, targets, loss_fn) for `name`."""
    if name == "resnet50-b8":
        torch.manual_seed(0)
        g = torch.Generator().manual_seed(0)
        return (torchvision.models.resnet50().train(), (torch.randn(8, 3, 224, 224, generator=g),),
                (torch.randint(0, 1000, (8,), generator=g),), None)
    model, inputs, targets, loss_fn, _ = make(name, 2)
    return model, inputs, targets, loss_fn


def one(name: str, way: str, plan: bool) -> dict:
    """The first export of `name` in this process, the `way` way, with its phases timed."""
    import memplan_torch.graph.step_graph as ex   # the names the export calls
    import memplan_torch.step.trace as tracing
    phases = {"trace": 0.0, "workspaces": 0.0}

    def timed(phase, fn):
        def run(*a, **k):
            t = time.perf_counter()
            try:
                return fn(*a, **k)
            finally:
                phases[phase] += time.perf_counter() - t
        return run

    trace, workspaces = ex.trace_fake, ex.node_workspaces
    if way == "real":  # the way before: real tensors through both trace passes, a warm-up run for workspaces
        trace = tracing.trace
        workspaces = (lambda ws: lambda gm, args: ws(gm, args, warmup=1))(workspaces)
    ex.trace_fake = timed("trace", trace)
    ex.node_workspaces = timed("workspaces", workspaces)
    model, inputs, targets, loss_fn = build(name)
    wall, cpu = time.perf_counter(), time.process_time()
    g = mt.export(model, inputs, loss_fn, targets=targets)
    wall, cpu = time.perf_counter() - wall, time.process_time() - cpu
    text = json.dumps(g, sort_keys=True)
    row = {"export": wall, "cpu": cpu, **phases, "ops": len(g["ops"]),
           "digest": hashlib.sha256(text.encode()).hexdigest()[:16]}
    if plan:
        path = f"/tmp/memplan-export-speed-{os.getpid()}.json"
        with open(path, "w") as f:
            f.write(text)
        try:
            t = time.perf_counter()
            p = subprocess.run([os.environ["MEMPLAN"], "plan", path, "--budget", "50%", "--time-limit", "1"],
                               stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
            row["plan"] = time.perf_counter() - t
            # 0: a plan; 4: the budget proven infeasible; 1 "no plan": none found within the time limit
            outcome = {0: "plan", 4: "infeasible"}.get(p.returncode)
            if outcome is None and "no plan:" not in p.stderr:
                raise RuntimeError(f"memplan plan exited {p.returncode}: {p.stderr.strip()}")
            row["outcome"] = outcome or "no plan in 1 s"
        finally:
            os.remove(path)
    return row


def main() -> None:
    ap = table_parser(MODELS)
    ap.add_argument("--repeats", type=int, default=2, help="fresh processes per model and way (median)")
    ap.add_argument("--plan", action="store_true", help="also time `memplan plan --budget 50%% --time-limit 1`")
    ap.add_argument("--one", help=argparse.SUPPRESS)  # a child process: one model, this way
    args = ap.parse_args()
    if args.one:
        emit(one(args.models[0], args.one, args.plan))
        return
    for n in args.models:
        if n not in MODELS:
            raise SystemExit(f"unknown model '{n}' (known: {' '.join(MODELS)})")
    header = ["model", "ops", "export s (fake)", "export s (real)", "trace s (fake / real)",
              "workspaces s (fake / real)", "CPU s (fake / real)", "same graph"] + (["plan s"] if args.plan else [])
    put = row_printer(header, args.out)
    for n in args.models:
        runs = {w: [] for w in WAYS}
        for r in range(args.repeats):
            for w in (WAYS if r % 2 == 0 else WAYS[::-1]):
                log(f"{n}: {w} trace, run {r + 1} of {args.repeats}")
                runs[w].append(isolated(os.path.abspath(__file__), [n, f"--one={w}"] + (["--plan"] if args.plan else [])))
        med = {w: {k: statistics.median(x[k] for x in runs[w]) for k in ("export", "cpu", "trace", "workspaces")}
               for w in WAYS}
        digests = {x["digest"] for w in WAYS for x in runs[w]}
        f, r_ = med["fake"], med["real"]
        cols = [n, str(runs["fake"][0]["ops"]), f"{f['export']:.2f}", f"{r_['export']:.2f}",
                f"{f['trace']:.2f} / {r_['trace']:.2f}", f"{f['workspaces']:.2f} / {r_['workspaces']:.2f}",
                f"{f['cpu']:.2f} / {r_['cpu']:.2f}", "yes" if len(digests) == 1 else f"NO ({len(digests)} digests)"]
        if args.plan:
            outcomes = sorted({x["outcome"] for x in runs["fake"]})
            cols.append(f"{statistics.median(x['plan'] for x in runs['fake']):.2f} ({', '.join(outcomes)})")
        put(cols)


if __name__ == "__main__":
    main()
