"""Every planner's plan of every exported graph through `memplan check`: `plan`, `plan --budget 50%`,
`plan --budget 33%` with each rematerialization planner, on the graphs of fidelity.py's models. Each
model is exported in a process of its own (common.isolated).

    build/venv/bin/python bench/torch/check_plans.py [--models ...] [--time-limit 5]
"""
import argparse
import os
import time

from common import LABEL, MODELS, emit, isolated, log, table

import memplan_torch as mt
from memplan_torch import command

PLANNERS = ["auto", "joint", "checkmate", "chain_dp", "block_dp", "chen_greedy", "sqrt_n", "store_all"]


def model_rows(name, time_limit):
    model, inputs, targets, loss_fn = MODELS[name]()
    log(f"{name}: export")
    g = mt.export(model, inputs, loss_fn, targets=targets, name=name)
    del model
    plan, _ = command.plan(g, None, time_limit=time_limit)
    ok, _ = command.check(g, plan)
    rows = [[LABEL[name], "plan", "-", "valid" if ok else "REJECTED", f"{plan['arena_bytes'] / 2**20:.1f}", "-"]]
    for budget in ("50%", "33%"):
        for remat in PLANNERS:
            log(f"{name}: {remat} at {budget}")
            t0 = time.perf_counter()
            try:
                plan, _ = command.plan(g, budget, remat=remat, time_limit=time_limit)
            except mt.Infeasible as e:
                rows.append(["", budget, remat, "infeasible: " + str(e)[:70], "-", "-"])
                continue
            except mt.NoPlan as e:
                rows.append(["", budget, remat, "no plan: " + str(e)[:70], "-", "-"])
                continue
            seconds = time.perf_counter() - t0
            ok, report = command.check(g, plan)
            rows.append(["", budget, remat, "valid" if ok else "REJECTED: " + report[:60],
                         f"{plan['arena_bytes'] / 2**20:.1f}", f"{seconds:.1f}"])
    return rows


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--models", default="resnet50,mobilenet_v2,vgg16,gpt2")
    ap.add_argument("--time-limit", type=float, default=5)
    ap.add_argument("--one", action="store_true", help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.one:
        emit({"rows": model_rows(args.models, args.time_limit)})
        return
    rows = []
    for name in args.models.split(","):
        rows += isolated(os.path.abspath(__file__), ["--one", "--models", name, "--time-limit",
                                                     f"{args.time_limit:g}"])["rows"]
    table(["graph", "budget", "planner", "memplan check", "arena (MiB)", "plan (s)"], rows)


if __name__ == "__main__":
    main()
