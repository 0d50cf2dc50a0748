"""Training with memplan_torch.compile at saved-activation budgets: gradients against the unplanned step
(the same executor with every tensor kept; and eager PyTorch where the model has no dropout), the plan's
predicted peak against the measured one (profiler, as in fidelity.py), the step time and what was
recomputed. A budget below what any schedule needs is reported as memplan reports it.

    build/venv/bin/python bench/torch/compile.py [--models resnet18,resnet50,gpt2] [--budgets 0.5,0.33]
"""
import argparse
import copy

import torch

from common import LABEL, MODELS, log, mib, peak_and_time, table

import memplan_torch as mt
from memplan_torch.export import _default_loss


def rel(a, b):
    return max(((x - y).abs().max() / y.abs().max().clamp_min(1e-30)).item() for x, y in zip(a, b))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--models", default="resnet18,resnet50,gpt2")
    ap.add_argument("--budgets", default="0.5,0.33")
    ap.add_argument("--repeats", type=int, default=3)
    args = ap.parse_args()
    rows = []
    for name in args.models.split(","):
        model0, inputs, targets, loss_fn = MODELS[name]()
        lf = loss_fn or _default_loss
        has_dropout = any(isinstance(m, torch.nn.Dropout) and m.p > 0 for m in model0.modules())
        eager = None
        if not has_dropout:
            ref = copy.deepcopy(model0)
            lf(ref(*inputs), *targets).backward()
            eager = [p.grad for p in ref.parameters()]
            del ref
        unplanned = None
        for budget in [None] + [float(b) for b in args.budgets.split(",")]:
            log(f"{name} at {budget}")
            model = copy.deepcopy(model0)
            try:
                cm = mt.compile(model, budget, inputs, targets=targets, loss_fn=loss_fn, time_limit=30)
            except mt.MemplanError as e:
                rows.append([LABEL[name], str(budget), f"{type(e).__name__}: {e}"[:100]] + [""] * 8)
                continue
            torch.manual_seed(1)
            cm(*inputs, *targets).backward()
            grads = [p.grad.clone() for p in model.parameters()]
            if budget is None:
                unplanned = grads
            e_unpl = rel(grads, unplanned)
            e_eager = "-" if eager is None else f"{rel(grads, eager):.1e}"
            peak, t = peak_and_time(model, inputs, targets, lambda: cm(*inputs, *targets).backward(),
                                    args.repeats)
            s = cm.schedule
            rows.append([LABEL[name], "store-all" if budget is None else str(budget),
                         mib(cm.budget_bytes), mib(s.saved_bytes), str(len(s.recomputed)), mib(s.live_peak),
                         mib(peak), f"{(peak - s.live_peak) / s.live_peak * 100:+.2f} %", f"{e_unpl:.1e}",
                         e_eager, f"{t:.2f}"])
            cm = model = None  # free the step before the next budget
    table(["model", "budget", "peak budget (MiB)", "saved (MiB)", "ops recomputed", "predicted peak (MiB)",
           "measured peak (MiB)", "measured vs predicted", "grad rel. err vs unplanned",
           "vs eager", "step (s)"], rows)


if __name__ == "__main__":
    main()
