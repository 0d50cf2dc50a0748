"""Every planner's plan of every exported graph through `memplan check`: `plan`, `plan --budget 50%`,
`plan --budget 33%` with each rematerialization planner, on the graphs of fidelity.py's models.

    build/venv/bin/python bench/torch/check_plans.py [--models ...] [--time-limit 5]
"""
import argparse

from common import LABEL, MODELS, log, table

import memplan_torch as mt
from memplan_torch import command

PLANNERS = ["auto", "joint", "checkmate", "chain_dp", "block_dp", "chen_greedy", "sqrt_n", "store_all"]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--models", default="resnet50,mobilenet_v2,vgg16,gpt2")
    ap.add_argument("--time-limit", type=float, default=5)
    args = ap.parse_args()
    rows = []
    for name in args.models.split(","):
        model, inputs, targets, loss_fn = MODELS[name]()
        log(f"{name}: export")
        g = mt.export(model, inputs, loss_fn, targets=targets, name=name)
        plan, _ = command.plan(g, None, time_limit=args.time_limit)
        ok, _ = command.check(g, plan)
        rows.append([LABEL[name], "plan", "-", "valid" if ok else "REJECTED", f"{plan['arena_bytes'] / 2**20:.1f}"])
        for budget in ("50%", "33%"):
            for remat in PLANNERS:
                log(f"{name}: {remat} at {budget}")
                try:
                    plan, _ = command.plan(g, budget, remat=remat, time_limit=args.time_limit)
                except mt.Infeasible as e:
                    rows.append(["", budget, remat, "infeasible: " + str(e)[:70], "-"])
                    continue
                except mt.NoPlan as e:
                    rows.append(["", budget, remat, "no plan: " + str(e)[:70], "-"])
                    continue
                ok, report = command.check(g, plan)
                rows.append(["", budget, remat, "valid" if ok else "REJECTED: " + report[:60],
                             f"{plan['arena_bytes'] / 2**20:.1f}"])
    table(["graph", "budget", "planner", "memplan check", "arena (MiB)"], rows)


if __name__ == "__main__":
    main()
