"""memplan against PyTorch's own activation-memory-budget partitioner, side by side, same run, same input.

For each model and saved-activation budget b (0.5, 0.33), PyTorch's partitioner
(``min_cut_rematerialization_partition`` with ``activation_memory_budget = b``: a min-cut, then a 0-1
knapsack over what to recompute, solved ``greedy`` / ``dp`` / ``ilp``; its runtime estimate is FLOPs)
partitions the joint graph of aot_autograd, and the step runs (FX graphs as Python, no code
generation). memplan then plans the same step three ways, all at the saved bytes of PyTorch's default
solver (dp), s:

- **memplan, peak**: the peak those saved bytes promise, the store-all peak less what is no longer
  saved, A - (S - s) (``memplan_torch.compile`` with a peak budget; cost model roofline:v100);
- **memplan, saved**: s as a budget on what crosses from the forward to the backward
  (``budget_on="saved"``), PyTorch's own kind of budget: neither the forward's transients nor the
  backward's memory count against it; cost model roofline:v100;
- **memplan, saved, flops**: the same with PyTorch's own cost model (``cost="flops"``: matrix FLOPs,
  other ops free), so that both planners minimise the same thing;
- where another solver's saved bytes differ from dp's by more than 0.05 % of S, the two ``saved`` rows
  again at that solver's bytes ("at greedy's bytes"), so that each peer is compared at its own memory.

Every row is scored by the same code: bytes saved for the backward (distinct storages the forward hands
over, weights excluded), recomputed FLOPs (PyTorch's flop counter) and recomputed cost under
roofline:v100 (the same formula for every planner; for PyTorch, the recomputed nodes whose results the
backward uses, with the dead ones its graphs also run counted apart, see recomputed_by_torch), the planner's time, the measured peak of the step on
the CPU (profiler, as in fidelity.py) against the peak A - (S - s), and the step time (median of
--repeats, unprofiled). Each configuration runs in a process of its own (common.isolated).

    build/venv/bin/python bench/torch/peers.py [--models resnet50,mobilenet_v2,gpt2] [--budgets 0.5,0.33]
        [--solvers greedy,dp,ilp] [--repeats 3] [--time-limit 30]

The ilp solver needs scipy in the venv (build/venv/bin/pip install scipy); without it its row says so.
"""
import argparse
import os
import sys
import time

import torch

from common import LABEL, MODELS, emit, isolated, log, mib, peak_and_time, table

import memplan_torch as mt
from memplan_torch import costs
from memplan_torch.graph.nodes import node_work, storage_key, tensors_of
from memplan_torch.probe import aot_step, saved_bytes_of

SCORE = "roofline:v100"


def _is_view(n):
    outs = [t for t in tensors_of(n.meta.get("val")) if t is not None]
    ins = {storage_key(v) for a in n.all_input_nodes for v in tensors_of(a.meta.get("val")) if v is not None}
    return all(storage_key(t) in ins for t in outs)


def score(nodes):
    """(matrix FLOPs, roofline:v100 microseconds, ops) of running the joint graph's `nodes` once more
    each (a node listed twice counts twice); views cost nothing and are not counted."""
    flops = us = 0.0
    count = 0
    for j in nodes:
        if _is_view(j):
            continue
        w = node_work(j)
        count += 1
        us += costs.model_us(SCORE, w)
        flops += w.flops if w.kind == costs.MATMUL else 0.0
    return flops, us, count


def recomputed_by_torch(cap):
    """The joint graph's forward nodes that PyTorch's backward graph runs again, as (used, dead): `dead` are
    those whose results nothing in the backward uses. PyTorch's partitions of the GPT-2 run such chains
    (a dropout's mask made again and never read, with the attention scores it came from): a random op is
    impure, so the graph keeps it and its inputs. They cost time but were no planner's choice; the table
    scores the used ones and counts the dead ones apart."""
    joint = cap["joint"]
    nodes = list(joint.graph.nodes)
    outs = [n for n in nodes if n.op == "output"][0].args[0]
    fwd = set()
    stack = [o for o in outs[: cap["num_fwd_outputs"]] if isinstance(o, torch.fx.Node)]
    while stack:
        n = stack.pop()
        if n.name not in fwd:
            fwd.add(n.name)
            stack.extend(n.all_input_nodes)
    bw_nodes = list(cap["bw"].graph.nodes)
    used = set()
    stack = [n for n in bw_nodes if n.op == "output"]
    while stack:
        n = stack.pop()
        if n.name not in used:
            used.add(n.name)
            stack.extend(n.all_input_nodes)
    by_name = {n.name: n for n in nodes}
    again = [n.name for n in bw_nodes if n.op == "call_function" and n.name in fwd]
    return [by_name[x] for x in again if x in used], [by_name[x] for x in again if x not in used]


def recomputed_by_memplan(cm):
    """The joint graph's nodes that memplan's plan runs more than once, once per extra run."""
    nodes = {n.name: n for n in cm.joint.gm.graph.nodes}
    counts = {}
    for op, node in cm.schedule.steps:
        if node is not None:
            counts[node] = counts.get(node, 0) + 1
    return [nodes[name] for name, c in counts.items() for _ in range(c - 1)]


def batch_stats_only(make):
    """The model with batch norm on batch statistics only (no running statistics): PyTorch's min-cut
    partitioner saves the running-statistics inputs for a batch norm it recomputes, which aot_autograd
    then updates in place, and autograd refuses the backward ("modified by an inplace operation").
    Both planners get this same model."""
    def make2():
        model, inputs, targets, loss_fn = make()
        for m in model.modules():
            if isinstance(m, torch.nn.modules.batchnorm._BatchNorm):
                m.track_running_stats = False
                m.running_mean = m.running_var = m.num_batches_tracked = None
        return model, inputs, targets, loss_fn
    return make2


def run_torch(make, solver, budget, repeats):
    from torch._functorch import config as fconfig
    from torch._functorch.partitioners import default_partition, min_cut_rematerialization_partition

    def partition(joint, inputs, **kw):
        if solver == "default":
            return default_partition(joint, inputs, **kw)
        with fconfig.patch(activation_memory_budget=budget, activation_memory_budget_solver=solver):
            return min_cut_rematerialization_partition(joint, inputs, compiler="inductor", **kw)

    model, inputs, targets, loss_fn = make()
    loss_fn = loss_fn or mt.default_loss
    cap, seconds = {}, {}

    def timed_partition(joint, joint_inputs, **kw):
        t0 = time.perf_counter()
        r = partition(joint, joint_inputs, **kw)
        seconds["plan"] = time.perf_counter() - t0
        return r

    step = aot_step(model, inputs, targets, loss_fn, timed_partition, cap)
    peak, t = peak_and_time(model, inputs, targets, step, repeats)
    used, dead = recomputed_by_torch(cap)
    flops, us, n = score(used)
    return dict(saved=saved_bytes_of(cap), flops=flops, us=us, ops=n, dead_ops=score(dead)[2],
                dead_us=score(dead)[1], plan=seconds.get("plan", 0.0), peak=peak, step=t)


def run_memplan(make, budget, repeats, budget_on, cost, time_limit):
    model, inputs, targets, loss_fn = make()
    cm = mt.compile(model, budget, inputs, targets=targets, loss_fn=loss_fn, cost=cost, time_limit=time_limit,
                    budget_on=budget_on)
    flops, us, n = score(recomputed_by_memplan(cm))
    peak, t = peak_and_time(model, inputs, targets, lambda: cm(*inputs, *targets).backward(), repeats)
    return dict(saved=cm.schedule.saved_bytes, flops=flops, us=us, ops=n, plan=cm.seconds["plan"], peak=peak,
                step=t, predicted=cm.schedule.live_peak)


def one(argv):
    """One configuration in this process: torch MODEL SOLVER BUDGET | memplan MODEL ON COST BUDGET."""
    ap = argparse.ArgumentParser()
    ap.add_argument("who", choices=["torch", "memplan"])
    ap.add_argument("model")
    ap.add_argument("how")              # torch: default|greedy|dp|ilp; memplan: peak|saved
    ap.add_argument("budget")           # a float, bytes (int), or "none"
    ap.add_argument("--cost", default=SCORE)
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--time-limit", type=float, default=30)
    a = ap.parse_args(argv)
    make = batch_stats_only(MODELS[a.model])
    budget = None if a.budget == "none" else (int(a.budget) if a.budget.isdigit() else float(a.budget))
    try:
        if a.who == "torch":
            emit(run_torch(make, a.how, budget, a.repeats))
        else:
            emit(run_memplan(make, budget, a.repeats, a.how, a.cost, a.time_limit))
    except mt.MemplanError as e:
        emit({"error": f"{type(e).__name__}: {e}"})
    except Exception as e:  # e.g. the ilp solver without scipy
        emit({"error": f"failed: {type(e).__name__}: {e}"})


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--models", default="resnet50,mobilenet_v2,gpt2")
    ap.add_argument("--budgets", default="0.5,0.33")
    ap.add_argument("--solvers", default="greedy,dp,ilp")
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--time-limit", type=float, default=30, help="memplan's time limit per plan (seconds)")
    args = ap.parse_args()
    me = os.path.abspath(__file__)
    common = ["--repeats", str(args.repeats), "--time-limit", f"{args.time_limit:g}"]

    def sub(*argv):
        log(" ".join(argv))
        return isolated(me, ["--one", *argv, *common])

    def row(model, budget, planner, r, target=None):
        if "error" in r:
            return [model, budget, planner, r["error"][:90]] + [""] * 7
        met = "-"
        if target is not None:
            met = f"{mib(target)}: " + ("yes" if r["peak"] <= target else
                                        f"no (+{(r['peak'] - target) / target * 100:.1f} %)")
        ops = str(r["ops"]) + (f" (+{r['dead_ops']} dead, {r['dead_us']:.0f} us)" if r.get("dead_ops") else "")
        return [model, budget, planner, mib(r["saved"]), f"{r['flops'] / 1e9:.2f}", f"{r['us']:.1f}",
                ops, f"{r['plan']:.2f}", mib(r["peak"]), met, f"{r['step']:.2f}"]

    rows = []
    for name in args.models.split(","):
        base = sub("memplan", name, "peak", "none")
        if "error" in base:
            rows.append(row(LABEL[name], "1.0", "memplan store-all", base))
            continue
        A, S = base["predicted"], base["saved"]
        rows.append(row(LABEL[name], "1.0", "PyTorch default", sub("torch", name, "default", "none")))
        rows.append(row("", "1.0", "memplan store-all", base))
        for b in args.budgets.split(","):
            results = {s: sub("torch", name, s, b) for s in args.solvers.split(",")}
            ok = {k: v for k, v in results.items() if "error" not in v}
            ref = "dp" if "dp" in ok else next(iter(ok), None)
            target = None if ref is None else int(A - (S - ok[ref]["saved"]))
            for s, r in results.items():
                rows.append(row("", b, f"PyTorch {s}", r, target))
            if ref is None:
                continue
            frac = repr(min(1.0, ok[ref]['saved'] / S))  # all its digits: the budget is then PyTorch's bytes
            rows.append(row("", b, "memplan, peak", sub("memplan", name, "peak", str(target)), target))
            rows.append(row("", b, "memplan, saved", sub("memplan", name, "saved", frac), target))
            rows.append(row("", b, "memplan, saved, flops",
                            sub("memplan", name, "saved", frac, "--cost", "flops"), target))
            # A solver that saved other bytes than dp is compared at its own bytes too: memplan with
            # less memory than a peer says nothing about which recomputes less.
            for s, r in ok.items():
                if s == ref or abs(r["saved"] - ok[ref]["saved"]) <= 5e-4 * S:
                    continue
                f = repr(min(1.0, r["saved"] / S))
                rows.append(row("", b, f"memplan, saved (at {s}'s bytes)", sub("memplan", name, "saved", f), target))
                rows.append(row("", b, f"memplan, saved, flops (at {s}'s bytes)",
                                sub("memplan", name, "saved", f, "--cost", "flops"), target))
    table(["model", "budget", "planner", "saved (MiB)", "recomputed GFLOP", f"recomputed us ({SCORE})",
           "recomputed ops", "plan (s)", "measured peak (MiB)", "peak budget (MiB): met", "step (s)"], rows)


if __name__ == "__main__":
    if len(sys.argv) > 1 and sys.argv[1] == "--one":
        one(sys.argv[2:])
    else:
        main()
