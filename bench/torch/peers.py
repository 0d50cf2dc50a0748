"""memplan against PyTorch's own activation-memory-budget partitioner, side by side, same run, same input.

For each model and saved-activation budget b (0.5, 0.33), PyTorch's partitioner
(``min_cut_rematerialization_partition`` with ``activation_memory_budget = b``: a min-cut, then a 0-1
knapsack over what to recompute, solved ``greedy`` / ``dp`` / ``ilp``; its runtime estimate is FLOPs)
partitions the joint graph of aot_autograd, and the step runs (FX graphs as Python, no code
generation). memplan is then given the peak that PyTorch's saved bytes would promise: the store-all
peak less the bytes PyTorch's choice (its default solver, dp) stops saving, A - (S_store_all - S_torch),
and plans that peak
(``memplan_torch.compile``); and, in a second row, memplan is given PyTorch's saved bytes as a budget on
the forward's memory alone (``budget_on="saved"``), PyTorch's own kind of budget. All are scored by the same code: bytes saved for the backward (distinct
storages the forward hands over, weights excluded), recomputed FLOPs (PyTorch's flop counter) and
recomputed cost under roofline:v100 (memplan's cost model, the same formula for both), the planner's
time, the measured peak of the step on the CPU (profiler, as in fidelity.py) against the budget, and
the step time (median of --repeats, unprofiled).

    build/venv/bin/python bench/torch/peers.py [--models resnet50,mobilenet_v2,gpt2] [--budgets 0.5,0.33]
"""
import argparse
import time

import torch
from torch._functorch import config as fconfig
from torch._functorch.partitioners import default_partition, min_cut_rematerialization_partition

from common import LABEL, MODELS, log, mib, peak_and_time, table

import memplan_torch as mt
from memplan_torch import costs
from memplan_torch.export import _default_loss, _key, _tensors_of, node_work
from memplan_torch.measure import aot_step, saved_bytes_of

COST = "roofline:v100"


def _is_view(n):
    outs = [t for t in _tensors_of(n.meta.get("val")) if t is not None]
    ins = {_key(v) for a in n.all_input_nodes for v in _tensors_of(a.meta.get("val")) if v is not None}
    return all(_key(t) in ins for t in outs)


def recomputed_in(cap):
    """(FLOPs, roofline cost in us, ops) of the forward nodes the backward graph runs again."""
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
    by_name = {n.name: n for n in nodes}
    flops = us = 0.0
    count = 0
    for n in cap["bw"].graph.nodes:
        if n.op != "call_function" or n.name not in fwd:
            continue
        j = by_name[n.name]
        if _is_view(j):
            continue
        w = node_work(j)
        count += 1
        us += costs.model_us(COST, w)
        flops += w.flops if w.kind == costs.MATMUL else 0.0
    return flops, us, count


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


def run_torch(make, partition, repeats):
    model, inputs, targets, loss_fn = make()
    loss_fn = loss_fn or _default_loss
    cap, seconds = {}, {}

    def timed_partition(joint, joint_inputs, **kw):
        t0 = time.perf_counter()
        r = partition(joint, joint_inputs, **kw)
        seconds["plan"] = time.perf_counter() - t0
        return r

    step = aot_step(model, inputs, targets, loss_fn, timed_partition, cap)
    peak, t = peak_and_time(model, inputs, targets, step, repeats)
    flops, us, n = recomputed_in(cap)
    return dict(saved=saved_bytes_of(cap), flops=flops, us=us, ops=n, plan=seconds.get("plan", 0.0),
                peak=peak, step=t)


def run_memplan(make, budget, repeats, budget_on="peak"):
    model, inputs, targets, loss_fn = make()
    cm = mt.compile(model, budget, inputs, targets=targets, loss_fn=loss_fn, cost=COST, time_limit=30,
                    budget_on=budget_on)
    g = {op["name"]: op for op in cm.graph["ops"]}
    counts = {}
    for op, _ in cm.schedule.steps:
        counts[op] = counts.get(op, 0) + 1
    flops = sum((c - 1) * g[o].get("flops", 0.0) for o, c in counts.items() if c > 1)
    us = sum((c - 1) * g[o]["cost"] for o, c in counts.items() if c > 1)
    n = sum(c - 1 for c in counts.values() if c > 1)

    peak, t = peak_and_time(model, inputs, targets, lambda: cm(*inputs, *targets).backward(), repeats)
    return dict(saved=cm.schedule.saved_bytes, flops=flops, us=us, ops=n,
                plan=cm.seconds["plan"], peak=peak, step=t, predicted=cm.schedule.live_peak,
                store_all=cm.store_all, schedule=cm.schedule)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--models", default="resnet50,mobilenet_v2,gpt2")
    ap.add_argument("--budgets", default="0.5,0.33")
    ap.add_argument("--solvers", default="greedy,dp,ilp")
    ap.add_argument("--repeats", type=int, default=3)
    args = ap.parse_args()
    rows = []
    for name in args.models.split(","):
        make = batch_stats_only(MODELS[name])
        log(f"{name}: memplan store-all")
        base = run_memplan(make, None, args.repeats)
        A, S = base["predicted"], base["saved"]
        log(f"{name}: PyTorch default partition")
        d = run_torch(make, default_partition, args.repeats)
        rows.append([LABEL[name], "1.0", "PyTorch default", mib(d["saved"]), "0", "0.0", "0", "-", mib(d["peak"]),
                     "-", f"{d['step']:.2f}"])
        rows.append(["", "1.0", "memplan store-all", mib(S), "0", "0.0", "0", f"{base['plan']:.2f}",
                     mib(base["peak"]), "-", f"{base['step']:.2f}"])
        for b in [float(x) for x in args.budgets.split(",")]:
            results = {}
            for solver in args.solvers.split(","):
                log(f"{name}: PyTorch at {b}, {solver}")

                def part(joint, inputs, **kw):
                    with fconfig.patch(activation_memory_budget=b, activation_memory_budget_solver=solver):
                        return min_cut_rematerialization_partition(joint, inputs, compiler="inductor", **kw)
                try:
                    results[solver] = run_torch(make, part, args.repeats)
                except Exception as e:  # e.g. the ilp solver without scipy
                    results[solver] = f"failed: {type(e).__name__}: {e}"[:60]
            ok = {k: v for k, v in results.items() if isinstance(v, dict)}
            if not ok:
                continue
            # memplan gets the saved bytes of PyTorch's default solver (dp), or of the first that ran.
            ref_solver = "dp" if "dp" in ok else next(iter(ok))
            s_t = ok[ref_solver]["saved"]
            target = int(A - (S - s_t))
            meets = lambda p: "yes" if p <= target else f"no (+{(p - target) / target * 100:.1f} %)"  # noqa
            for solver, r in results.items():
                if not isinstance(r, dict):
                    rows.append(["", f"{b}", f"PyTorch {solver}", r] + [""] * 7)
                    continue
                rows.append(["", f"{b}", f"PyTorch {solver}", mib(r["saved"]), f"{r['flops'] / 1e9:.1f}",
                             f"{r['us']:.1f}", str(r["ops"]), f"{r['plan']:.2f}", mib(r["peak"]),
                             f"{mib(target)}: {meets(r['peak'])}", f"{r['step']:.2f}"])
            runs = [("memplan, peak", target, "peak"),
                    ("memplan, saved bytes", min(1.0, s_t / S), "saved")]
            for label, budget, on in runs:
                log(f"{name}: {label} at PyTorch-{ref_solver}'s saved bytes ({mib(s_t)} MiB; peak {mib(target)} MiB)")
                try:
                    m = run_memplan(make, budget, args.repeats, budget_on=on)
                except mt.MemplanError as e:
                    rows.append(["", f"{b}", label, f"no plan: {e}"[:80]] + [""] * 7)
                    continue
                rows.append(["", f"{b}", label, mib(m["saved"]), f"{m['flops'] / 1e9:.1f}",
                             f"{m['us']:.1f}", str(m["ops"]), f"{m['plan']:.2f}", mib(m["peak"]),
                             f"{mib(target)}: {meets(m['peak'])}", f"{m['step']:.2f}"])
    table(["model", "budget", "planner", "saved (MiB)", "recomputed GFLOP", "recomputed us (roofline:v100)",
           "recomputed ops", "plan (s)", "measured peak (MiB)", "peak budget (MiB): met", "step (s)"], rows)


if __name__ == "__main__":
    main()
