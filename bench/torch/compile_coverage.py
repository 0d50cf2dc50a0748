"""Which models train under torch.compile with memplan's partitioner, at every fraction and at a byte budget.

    build/venv/bin/python bench/torch/compile_coverage.py [--fractions 1.0,0.7,0.5,0.3,0] [--time-limit S]
        [--reuse-kernels] [--out FILE] [MODEL ...]

For each model (coverage.py's Hugging Face and torchvision families at their tiny sizes, plus the families only
this bench has: ``hf:mixtral`` and ``hf:qwen2_moe``, mixtures of experts, and ``hf:gemma3``, masked sliding-window
attention), in a process of its own (``common.isolated``): the training step ``loss_fn(model, inputs, targets)``
compiled with ``torch.compile`` (graph breaks allowed) and ``memplan_torch.Partitioner`` as Inductor's
``custom_partitioner_fn``, once per budget: each fraction f of ``--fractions`` (f of the way from the smallest peak
memplan reaches for a region to its store-all arena), then one byte budget B between the two, B = floor + 0.4
(store-all - floor) of the largest region at f = 0. Each compile starts from empty caches. One row a budget:
the compiled regions, the budget and memplan's plan (the largest region's), the step's measured CPU peak
(``probe.peak_of``: the allocator's events over one step, which makes the gradients, plus the weights and the
inputs resident) and whether it is at or below the budget, the largest relative gradient difference against
eager PyTorch (``common.grad_diff``), the partitioner's and the compile's seconds; the model's last row gives the gradient difference of the step compiled
with PyTorch's own partitioner (compiled first, with Inductor's defaults), what compiling alone does to the
gradients (train-mode batch norm at a small batch amplifies float32's round-off in every compiled step). A step of several compiled
regions (graph breaks) is compiled with ``Partitioner.fit`` at every budget (once the first compile shows the
regions): the budget is then the step's, from the smallest measured step peak fit reaches (f = 0) to the
store-all one, and the byte budget lies between those two. Per model, the last row says whether the measured peak falls
monotonically with f. A compile that fails prints its error in the row. ``--reuse-kernels``: a model's compiles
share one kernel cache (Inductor's generated C++ or Triton, by source), which leaves the partitions, peaks and
gradients as they are and makes the compiles after the first faster, and their seconds smaller."""
from __future__ import annotations

import argparse
import copy
import os
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)

from common import emit, grad_diff, isolated, log, row_printer, table_parser  # noqa: E402
from coverage import MODELS as COVERAGE_MODELS, make  # noqa: E402

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
REUSE_KERNELS = False   # --reuse-kernels: one kernel cache for all of a model's compiles, this one
_SHARED = tempfile.mkdtemp(dir=_CACHES.name)


def compiled(model, loss, inputs, targets, partitioner, fit: bool = False, **inductor):
    """(compiled step, compile seconds, fit seconds): its own step function, compiled from empty caches, first
    call's backward included; with `fit`, ``partitioner.fit`` first divides the step's budget among its regions
    (the compile seconds are then the compile with the plans fit chose); `inductor`: Inductor's options for
    this compile (torch._inductor.config)."""
    import torch._dynamo
    import torch._functorch.config as fconfig
    import torch._inductor.config as iconfig
    from torch._inductor.utils import clear_caches
    torch._dynamo.reset()
    clear_caches()
    os.environ["TORCHINDUCTOR_CACHE_DIR"] = _SHARED if REUSE_KERNELS else tempfile.mkdtemp(dir=_CACHES.name)
    ns = {"model": model, "loss": loss}
    exec("def step(i, t):\n    return loss(model, i, t)\n", ns)
    fn = torch.compile(ns["step"])
    with iconfig.patch(custom_partitioner_fn=partitioner, fx_graph_cache=False, **inductor), \
            fconfig.patch(enable_autograd_cache=False):
        t = time.perf_counter()
        if fit:
            partitioner.fit(model, lambda m, i, t: fn(i, t), inputs, targets)
        t_fit = time.perf_counter() - t
        t = time.perf_counter()
        fn(inputs, targets).backward()
        seconds = time.perf_counter() - t
    model.zero_grad(set_to_none=True)
    return fn, seconds, t_fit


def one(name: str, fractions: list[float], time_limit: float | None) -> dict:
    from memplan_torch import Partitioner
    from memplan_torch.probe import peak_of, storage_bytes
    model, inputs, targets, loss_fn, label = model_case(name)
    loss = loss_of(loss_fn)
    ref = copy.deepcopy(model)
    loss(ref, inputs, targets).backward()
    resident = storage_bytes(list(model.parameters()) + list(model.buffers()) + list(inputs) + list(targets))
    rows = []
    # The reference for the gradients: PyTorch's own partitioner's compiled step (Inductor's defaults, before
    # memplan's partitioner sets its guards), against eager, as every row is.
    log(f"{name}: PyTorch's partitioner")
    fn, _, _ = compiled(model, loss, inputs, targets, None)
    fn(inputs, targets).backward()
    pytorch_grad = grad_diff(model, ref)[0]
    model.zero_grad(set_to_none=True)

    def run(budget, fit):
        log(f"{name}: budget {budget}" + (" (Partitioner.fit)" if fit else ""))
        part = Partitioner(budget, time_limit=time_limit)
        row = {"budget": budget, "fit": fit}
        try:
            fn, seconds, fit_seconds = compiled(model, loss, inputs, targets, part, fit=fit)
        except Exception as e:  # noqa: BLE001 - a failed compile is a row
            inner = getattr(e, "inner_exception", None) or e
            row["error"] = f"{type(inner).__name__}: {str(inner).strip().splitlines()[0][:200]}"
            return row
        step = (lambda: fn(inputs, targets).backward())
        model.zero_grad(set_to_none=True)
        step()
        row["grad"], row["missing"] = grad_diff(model, ref)
        model.zero_grad(set_to_none=True)
        row["peak"] = peak_of(step, resident)[0]
        model.zero_grad(set_to_none=True)
        row.update(regions=len(part.partitions), compile=seconds,
                   partition=fit_seconds + sum(sum(p.seconds.values()) for p in part.partitions))
        if fit:  # the step's budget, its smallest and store-all peaks (measured), and the model's prediction
            sp = part.step_plan
            row.update(budget_bytes=sp.budget, arena=sp.predicted, store_all=sp.store_all, floor=sp.smallest)
        else:
            largest = max(part.partitions, key=lambda p: p.report["store_all"])
            row.update(budget_bytes=largest.budget, arena=largest.plan["arena_bytes"],
                       store_all=largest.report["store_all"], floor=largest.report.get("floor"))
        return row

    floor = top = None
    fit = False
    for f in fractions:
        row = run(f, fit)
        if not fit and row.get("regions", 1) > 1:  # several regions: the step's budget is fit's to divide
            fit = True
            row = run(f, fit)
        rows.append(row)
        if f == 0 and "error" not in row:
            floor, top = row["floor"], row["store_all"]
    if floor is not None and top is not None and top > floor:
        rows.append(run(int(floor + 0.4 * (top - floor)), fit))
    return {"label": label, "rows": rows, "pytorch_grad": pytorch_grad}


def main() -> None:
    ap = table_parser(MODELS)
    ap.add_argument("--fractions", default="1.0,0.7,0.5,0.3,0")
    ap.add_argument("--time-limit", type=float, default=None,
                    help="seconds of each memplan plan (default: the partitioner's, which grows with the region)")
    ap.add_argument("--reuse-kernels", action="store_true",
                    help="one kernel cache for all of a model's compiles (faster; the compile seconds after the "
                         "first compile then leave out the kernels compiled before)")
    ap.add_argument("--one", action="store_true", help=argparse.SUPPRESS)
    args = ap.parse_args()
    fractions = [float(f) for f in args.fractions.split(",")]
    if args.one:
        global REUSE_KERNELS
        REUSE_KERNELS = args.reuse_kernels
        emit(one(args.models[0], fractions, args.time_limit))
        return
    put = row_printer(HEADER, args.out)
    mib = lambda b: f"{b / 2**20:.2f}"  # noqa: E731
    for name in args.models:
        limit = ["--time-limit", str(args.time_limit)] if args.time_limit is not None else []
        try:
            r = isolated(os.path.abspath(__file__), ["--one", name, "--fractions", args.fractions] + limit
                         + (["--reuse-kernels"] if args.reuse_kernels else []))
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
            within = "-" if row["regions"] != 1 and not row["fit"] else ("yes" if row["peak"] <= row["budget_bytes"] else
                                                     f"NO (+{mib(row['peak'] - row['budget_bytes'])} MiB)")
            put([r["label"], shown, str(row["regions"]), mib(row["budget_bytes"]), mib(row["arena"]),
                 mib(row["peak"]), within, f"{row['grad']:.1e}", f"{row['partition']:.2f}",
                 f"{row['compile']:.1f}", "; ".join(
                     (["Partitioner.fit: the budget is the step's, plan MiB its model's prediction"] if row["fit"]
                      else []) + ([f"{row['missing']} grads missing"] if row["missing"] else []))])
        peaks.sort(reverse=True)
        monotone = all(peaks[i][1] >= peaks[i + 1][1] for i in range(len(peaks) - 1))
        put([r["label"], "monotone in f", "", "", "", "", "", "", "", "",
             ("yes" if monotone else "NO") + ": " + ", ".join(f"{f}: {mib(p)}" for f, p in peaks)
             + f"; PyTorch's own partitioner's compiled step: grad rel diff {r['pytorch_grad']:.1e}"])


if __name__ == "__main__":
    main()
