"""Training with memplan_torch.compile at saved-activation budgets: gradients against the unplanned step
(the same executor with every tensor kept; and eager PyTorch where the model has no dropout), the plan's
predicted peak against the measured one (profiler, as in fidelity.py), the step time and what was
recomputed. Each budget is planned as a peak for the whole step (budget_on="peak": the fraction f made
into A - (1 - f) S, memplan resolves it as "saved:F", docs/remat.md "Budgets") and as a budget on what crosses from the
forward to the backward (budget_on="saved", PyTorch's kind); the "budget (MiB)" column is the peak
memplan planned for, or for "saved" the bytes allowed at the backward's seed. A budget below what any schedule needs is reported as memplan
reports it. Each model runs in a process of its own (common.isolated).

    build/venv/bin/python bench/torch/compile.py [--models resnet18,resnet50,gpt2] [--budgets 0.5,0.33]
        [--on peak,saved] [--repeats 3] [--time-limit 30]
"""
import argparse
import copy
import os

import torch

from common import LABEL, MODELS, emit, isolated, log, mib, peak_and_time, table

import memplan_torch as mt


def rel(a, b):
    return max(((x - y).abs().max() / y.abs().max().clamp_min(1e-30)).item() for x, y in zip(a, b))


def model_rows(name, budgets, ons, repeats, time_limit):
    """The table's rows for one model: store-all, then each budget on each kind of budget (`ons`: "peak",
    the fraction made into a peak for the whole step; "saved", a budget on the forward's memory alone, as
    PyTorch's activation budget is)."""
    rows = []
    model0, inputs, targets, loss_fn = MODELS[name]()
    lf = loss_fn or mt.default_loss
    has_dropout = any(isinstance(m, torch.nn.Dropout) and m.p > 0 for m in model0.modules())
    eager = None
    if not has_dropout:
        ref = copy.deepcopy(model0)
        lf(ref(*inputs), *targets).backward()
        eager = [p.grad for p in ref.parameters()]
        del ref
    unplanned = None
    for budget, on in [(None, "peak")] + [(b, on) for on in ons for b in budgets]:
        log(f"{name} at {budget} ({on})")
        label = "store-all" if budget is None else f"{budget} ({on})"
        model = copy.deepcopy(model0)
        try:
            # A saved-activation fraction either way: "saved:F" of the peak, F of store-all's saved bytes.
            given = f"saved:{budget}" if budget is not None and on == "peak" else budget
            cm = mt.compile(model, given, inputs, targets=targets, loss_fn=loss_fn, time_limit=time_limit,
                            budget_on=on)
        except mt.MemplanError as e:
            rows.append([LABEL[name], label, f"{type(e).__name__}: {e}"[:100]] + [""] * 9)
            continue
        torch.manual_seed(1)
        cm(*inputs, *targets).backward()
        grads = [p.grad.clone() for p in model.parameters()]
        if budget is None:
            unplanned = grads
        e_unpl = rel(grads, unplanned)
        e_eager = "-" if eager is None else f"{rel(grads, eager):.1e}"
        peak, t = peak_and_time(model, inputs, targets, lambda: cm(*inputs, *targets).backward(), repeats)
        s = cm.schedule
        rows.append([LABEL[name], label,
                     mib(cm.budget_bytes), mib(s.saved_bytes), str(len(s.recomputed)), mib(s.live_peak),
                     mib(peak), f"{(peak - s.live_peak) / s.live_peak * 100:+.2f} %", f"{e_unpl:.1e}",
                     e_eager, f"{t:.2f}", f"{cm.seconds['plan']:.1f}"])
        cm = model = grads = None  # free the step before the next budget
    return rows


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--models", default="resnet18,resnet50,gpt2")
    ap.add_argument("--budgets", default="0.5,0.33")
    ap.add_argument("--on", default="peak,saved", help="kinds of budget: peak (the step's peak), saved "
                    "(what crosses from the forward to the backward, as PyTorch's activation budget)")
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--time-limit", type=float, default=30, help="memplan's time limit per plan (seconds)")
    ap.add_argument("--one", action="store_true", help=argparse.SUPPRESS)
    args = ap.parse_args()
    budgets = [float(b) for b in args.budgets.split(",")]
    if args.one:
        emit({"rows": model_rows(args.models, budgets, args.on.split(","), args.repeats, args.time_limit)})
        return
    rows = []
    for name in args.models.split(","):
        r = isolated(os.path.abspath(__file__), ["--one", "--models", name, "--budgets", args.budgets, "--on", args.on,
                                                 "--repeats", str(args.repeats), "--time-limit",
                                                 f"{args.time_limit:g}"])
        rows += r["rows"]
    table(["model", "budget (on)", "budget (MiB)", "saved (MiB)", "ops recomputed", "predicted peak (MiB)",
           "measured peak (MiB)", "measured vs predicted", "grad rel. err vs unplanned",
           "vs eager", "step (s)", "plan (s)"], rows)


if __name__ == "__main__":
    main()
