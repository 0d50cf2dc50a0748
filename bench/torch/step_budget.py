"""A budget for the whole step across compiled regions (``Partitioner.fit``), measured.

    build/venv/bin/python bench/torch/step_budget.py [--budgets 1.0,0.5,bytes:0.3] [--time-limit 2] [--out FILE]
        [CASE ...]

Cases (a Hugging Face Llama, 4 layers, hidden 256, 4 heads, 2 KV heads, FFN 1024, vocabulary 4000, batch 2 x
128 tokens, three AdamW-free training steps' worth of forward and backward on this CPU):

- ``blocks``: each decoder layer compiled on its own (``layer.compile()``, as torchtitan compiles blocks), the
  embedding, the final norm, the LM head and the loss eager;
- ``breaks``: the whole loss compiled (``torch.compile``) with graph breaks after layers 1 and 3 (a forward
  hook that calls ``torch._dynamo.graph_break()``): three regions of layers and one of the head and the loss.

For each case, in a process of its own (``common.isolated``), and each budget of ``--budgets`` (a fraction f of
the way from the smallest measured step peak to store-all's, or ``bytes:F``: bytes F of the way, both ends
from the last fit before it that measured them), ``Partitioner(budget).fit(model, loss, ids)``, then a fresh measurement of one step
(``probe.measure_step``: the allocator's CPU events over forward and backward, plus the weights, buffers and
inputs resident). One row a budget: the regions (distinct, runs), the step's budget, the store-all and the
smallest measured peaks, the modelled and the fit-time measured peak of the chosen plans, the fresh
measured peak and whether it is at or below the budget, the plans chosen, the largest relative gradient
difference against eager PyTorch (``common.grad_diff``), fit's seconds and compiles, and the median step time
over 5 steps."""
from __future__ import annotations

import argparse
import copy
import os
import statistics
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)

from common import emit, grad_diff, isolated, log, mib, row_printer  # noqa: E402

import torch  # noqa: E402

CASES = ["blocks", "breaks"]
HEADER = ["case", "budget", "regions (runs)", "budget MiB", "store-all MiB", "smallest MiB", "model MiB",
          "fit measured MiB", "measured MiB", "<= budget", "plans", "grad rel diff", "fit s (compiles)", "step ms"]


def llama():
    import transformers as tf
    torch.manual_seed(0)
    cfg = tf.LlamaConfig(num_hidden_layers=4, hidden_size=256, intermediate_size=1024, num_attention_heads=4,
                         num_key_value_heads=2, vocab_size=4000, max_position_embeddings=128)
    model = tf.LlamaForCausalLM(cfg).train()
    ids = torch.randint(0, 4000, (2, 128), generator=torch.Generator().manual_seed(1))
    return model, ids


def _loss(m, ids):
    return m(input_ids=ids, labels=ids).loss


def _break(module, args, output):
    torch._dynamo.graph_break()


def one(case: str, budgets: list[str], time_limit: float) -> dict:
    import torch._inductor.config as iconfig
    from memplan_torch import Partitioner
    from memplan_torch.probe import measure_step, storage_bytes
    model, ids = llama()
    ref = copy.deepcopy(model)
    _loss(ref, ids).backward()
    if case == "blocks":
        for layer in model.model.layers:
            layer.compile()
        loss = _loss
    else:
        for i in (1, 3):
            model.model.layers[i].register_forward_hook(_break)
        loss = torch.compile(_loss)
    resident = storage_bytes(list(model.parameters()) + list(model.buffers()) + [ids])
    rows, ends = [], None
    for given in budgets:
        if given.startswith("bytes:"):
            if ends is None:
                continue
            budget = int(ends[0] + float(given[6:]) * (ends[1] - ends[0]))
        else:
            budget = float(given)
        log(f"{case}: budget {budget}")
        part = Partitioner(budget, time_limit=time_limit)
        iconfig.custom_partitioner_fn = part
        t = time.perf_counter()
        plan = part.fit(model, loss, ids)
        seconds = time.perf_counter() - t
        if plan.smallest < plan.store_all:  # both ends measured (a budget below store-all)
            ends = (plan.smallest, plan.store_all)
        model.zero_grad(set_to_none=True)
        loss(model, ids).backward()
        diff, _ = grad_diff(model, ref)
        model.zero_grad(set_to_none=True)
        peak = measure_step(lambda: loss(model, ids).backward(), resident).peak
        times = []
        for _ in range(5):
            model.zero_grad(set_to_none=True)
            t = time.perf_counter()
            loss(model, ids).backward()
            times.append(time.perf_counter() - t)
        model.zero_grad(set_to_none=True)
        rows.append({"budget": given, "plan": plan.__dict__, "peak": peak, "grad": diff, "fit": seconds,
                     "step": statistics.median(times), "partitions": len(part.partitions)})
    return {"rows": rows}


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("cases", nargs="*", default=CASES)
    ap.add_argument("--budgets", default="1.0,0.5,bytes:0.3")
    ap.add_argument("--time-limit", type=float, default=2.0)
    ap.add_argument("--out")
    ap.add_argument("--one", help=argparse.SUPPRESS)
    args = ap.parse_args()
    budgets = args.budgets.split(",")
    if args.one:
        emit(one(args.one, budgets, args.time_limit))
        return
    row = row_printer(HEADER, args.out)
    for case in args.cases:
        try:
            res = isolated(__file__, ["--one", case, "--budgets", args.budgets, "--time-limit", str(args.time_limit)])
        except RuntimeError as e:
            row([case] + [""] * (len(HEADER) - 2) + [str(e)[:200]])
            continue
        for r in res["rows"]:
            p = r["plan"]
            distinct = len(p["chosen"])
            plans = "; ".join(f"{c['budget']}{' (saved)' if c['budget_on'] == 'saved' else ''} x{c['runs']}"
                              for c in p["chosen"])
            row([case, r["budget"], f"{distinct} ({len(p['runs'])})", mib(p["budget"]), mib(p["store_all"]),
                 mib(p["smallest"]), mib(p["predicted"]), mib(p["measured"]), mib(r["peak"]),
                 "yes" if r["peak"] <= p["budget"] else f"no (+{(r['peak'] - p['budget']) / 2**20:.2f} MiB)",
                 plans, f"{r['grad']:.1e}", f"{r['fit']:.0f} ({p['compiles']})", f"{r['step'] * 1e3:.1f}"])


if __name__ == "__main__":
    main()
