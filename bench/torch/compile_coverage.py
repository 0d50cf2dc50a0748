"""Which models train under torch.compile with memplan's partitioner, at every fraction and at a byte budget.

    build/venv/bin/python bench/torch/compile_coverage.py [--fractions 1.0,0.7,0.5,0.3,0] [--time-limit 2]
        [--out FILE] [MODEL ...]

For each model (coverage.py's Hugging Face and torchvision families at their tiny sizes, plus the families only
this bench has: ``hf:mixtral`` and ``hf:qwen2_moe``, mixtures of experts, and ``hf:gemma3``, masked sliding-window
attention), in a process of its own (``common.isolated``): the training step ``loss_fn(model, inputs, targets)``
compiled with ``torch.compile`` (graph breaks allowed) and ``memplan_torch.Partitioner`` as Inductor's
``custom_partitioner_fn``, once per budget: each fraction f of ``--fractions`` (f of the way from the smallest peak
memplan reaches for a region to its store-all arena), then one byte budget B between the two, B = floor + 0.4
(store-all - floor) of the largest region at f = 0. Each compile starts from empty caches. One row a budget:
the compiled regions, the budget and memplan's plan (the largest region's), the step's measured CPU peak
(``probe.peak_of``: the allocator's events over one step, which makes the gradients, plus the weights and the
inputs resident) and whether it is at or below the budget (one region only: with several, each region has its
own budget), the largest relative gradient difference against eager PyTorch (``common.grad_diff``), the
partitioner's and the compile's seconds. Per model, the last row says whether the measured peak falls
monotonically with f. A compile that fails prints its error in the row."""
from __future__ import annotations

import argparse
import copy
import os
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)

from common import emit, grad_diff, isolated, log, row_printer  # noqa: E402
from coverage import HF, MODELS as COVERAGE_MODELS, make  # noqa: E402

import torch  # noqa: E402
import transformers as tf  # noqa: E402

EXTRA_HF = {"mixtral": "MixtralForCausalLM", "qwen2_moe": "Qwen2MoeForCausalLM", "gemma3": "Gemma3ForCausalLM"}
MODELS = COVERAGE_MODELS + [f"hf:{n}" for n in EXTRA_HF]
HEADER = ["model", "budget", "regions", "budget MiB", "plan MiB", "peak MiB", "peak <= budget", "grad rel diff",
          "partitioner s", "compile s", "note"]


def build_extra(name: str, batch: int = 2, seq: int = 128):
    """The families only this bench has, at hf_families.py's tiny sizes (2 layers, hidden 256, vocabulary 4000)."""
    torch.manual_seed(0)
    h, vocab = 256, 4000
    dec = dict(num_hidden_layers=2, hidden_size=h, intermediate_size=4 * h, num_attention_heads=4,
               num_key_value_heads=2, vocab_size=vocab, max_position_embeddings=seq)
    if name == "mixtral":
        m = tf.MixtralForCausalLM(tf.MixtralConfig(**dec, num_local_experts=4, num_experts_per_tok=2))
    elif name == "qwen2_moe":
        m = tf.Qwen2MoeForCausalLM(tf.Qwen2MoeConfig(**dec, num_experts=4, num_experts_per_tok=2,
                                                     moe_intermediate_size=2 * h, shared_expert_intermediate_size=2 * h))
    elif name == "gemma3":
        m = tf.Gemma3ForCausalLM(tf.Gemma3TextConfig(**dec, head_dim=h // 4, sliding_window=32))
    else:
        raise SystemExit(f"unknown model 'hf:{name}'")
    ids = torch.randint(0, vocab, (batch, seq), generator=torch.Generator().manual_seed(0))
    return m.train(), (ids,), (ids,), "model", f"{EXTRA_HF[name]} (b{batch}, {seq} tokens)"


def model_case(name: str):
    if name.startswith("hf:") and name[3:] in EXTRA_HF:
        return build_extra(name[3:])
    return make(name, 2)


def loss_of(loss_fn):
    import memplan_torch as mt
    return lambda model, inputs, targets: mt.step_loss(model, loss_fn, inputs, targets)


_CACHES = tempfile.TemporaryDirectory(prefix="memplan-compile-coverage-")


def compiled(model, loss, inputs, targets, partitioner, **inductor):
    """(compiled step, compile seconds): its own step function, compiled from empty caches, first call's
    backward included; `inductor`: Inductor's options for this compile (torch._inductor.config)."""
    import torch._dynamo
    import torch._functorch.config as fconfig
    import torch._inductor.config as iconfig
    from torch._inductor.utils import clear_caches
    torch._dynamo.reset()
    clear_caches()
    os.environ["TORCHINDUCTOR_CACHE_DIR"] = tempfile.mkdtemp(dir=_CACHES.name)
    ns = {"model": model, "loss": loss}
    exec("def step(i, t):\n    return loss(model, i, t)\n", ns)
    fn = torch.compile(ns["step"])
    with iconfig.patch(custom_partitioner_fn=partitioner, fx_graph_cache=False, **inductor), \
            fconfig.patch(enable_autograd_cache=False):
        t = time.perf_counter()
        fn(inputs, targets).backward()
        seconds = time.perf_counter() - t
    model.zero_grad(set_to_none=True)
    return fn, seconds


def one(name: str, fractions: list[float], time_limit: float) -> dict:
    from memplan_torch import Partitioner
    from memplan_torch.probe import peak_of, storage_bytes
    model, inputs, targets, loss_fn, label = model_case(name)
    loss = loss_of(loss_fn)
    ref = copy.deepcopy(model)
    loss(ref, inputs, targets).backward()
    resident = storage_bytes(list(model.parameters()) + list(model.buffers()) + list(inputs) + list(targets))
    rows = []

    def run(budget):
        log(f"{name}: budget {budget}")
        part = Partitioner(budget, time_limit=time_limit)
        row = {"budget": budget}
        try:
            fn, seconds = compiled(model, loss, inputs, targets, part)
        except Exception as e:  # noqa: BLE001 - a failed compile is a row
            inner = getattr(e, "inner_exception", None) or e
            row["error"] = f"{type(inner).__name__}: {str(inner).strip().splitlines()[0][:200]}"
            return row, part
        step = (lambda: fn(inputs, targets).backward())
        model.zero_grad(set_to_none=True)
        step()
        row["grad"], row["missing"] = grad_diff(model, ref)
        model.zero_grad(set_to_none=True)
        row["peak"] = peak_of(step, resident)[0]
        model.zero_grad(set_to_none=True)
        largest = max(part.partitions, key=lambda p: p.report["store_all"])
        row.update(regions=len(part.partitions), compile=seconds,
                   partition=sum(sum(p.seconds.values()) for p in part.partitions),
                   budget_bytes=largest.budget, arena=largest.plan["arena_bytes"],
                   store_all=largest.report["store_all"], floor=largest.report.get("floor"))
        return row, part

    floor = top = None
    for f in fractions:
        row, _ = run(f)
        rows.append(row)
        if f == 0 and "error" not in row:
            floor, top = row["floor"], row["store_all"]
    if floor is not None and top is not None and top > floor:
        rows.append(run(int(floor + 0.4 * (top - floor)))[0])
    return {"label": label, "rows": rows}


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("models", nargs="*", default=MODELS, help=f"(default: all) {' '.join(MODELS)}")
    ap.add_argument("--fractions", default="1.0,0.7,0.5,0.3,0")
    ap.add_argument("--time-limit", type=float, default=2.0)
    ap.add_argument("--out", help="also write the table (markdown) to this file, a row as it is known")
    ap.add_argument("--one", action="store_true", help=argparse.SUPPRESS)
    args = ap.parse_args()
    fractions = [float(f) for f in args.fractions.split(",")]
    if args.one:
        emit(one(args.models[0], fractions, args.time_limit))
        return
    put = row_printer(HEADER, args.out)
    mib = lambda b: f"{b / 2**20:.2f}"  # noqa: E731
    for name in args.models:
        try:
            r = isolated(os.path.abspath(__file__), ["--one", name, "--fractions", args.fractions,
                                                     "--time-limit", str(args.time_limit)])
        except RuntimeError as e:
            put([name, "-", "-", "-", "-", "-", "-", "-", "-", "-", str(e)[:200]])
            continue
        peaks = []
        for row in r["rows"]:
            b = row["budget"]
            shown = f"f = {b}" if isinstance(b, float) else f"{b} B"
            if "error" in row:
                put([r["label"], shown, "-", "-", "-", "-", "-", "-", "-", "-", row["error"]])
                continue
            if isinstance(b, float):
                peaks.append((b, row["peak"]))
            within = "-" if row["regions"] != 1 else ("yes" if row["peak"] <= row["budget_bytes"] else
                                                     f"NO (+{mib(row['peak'] - row['budget_bytes'])} MiB)")
            put([r["label"], shown, str(row["regions"]), mib(row["budget_bytes"]), mib(row["arena"]),
                 mib(row["peak"]), within, f"{row['grad']:.1e}", f"{row['partition']:.2f}",
                 f"{row['compile']:.1f}", "" if not row["missing"] else f"{row['missing']} grads missing"])
        peaks.sort(reverse=True)
        monotone = all(peaks[i][1] >= peaks[i + 1][1] for i in range(len(peaks) - 1))
        put([r["label"], "monotone in f", "", "", "", "", "", "", "", "",
             ("yes" if monotone else "NO") + ": " + ", ".join(f"{f}: {mib(p)}" for f, p in peaks)])


if __name__ == "__main__":
    main()
