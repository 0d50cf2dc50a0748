"""memplan_torch on a CUDA device: each model's training step planned with memplan_torch.compile and run on the
device, at store-all and at a budget of 0.5 (a fraction of the step's peak: halfway from the smallest peak memplan
reaches to store-all's arena, budget_on="peak", docs/torch.md "Budgets"). One line a row, printed the moment it is known:

    torch MODEL BUDGET: predicted peak X MiB, max_memory_allocated Y MiB, max_memory_reserved Z MiB, grads equal to
    unplanned: yes (max rel diff D), to store-all: yes (max rel diff E), ms/step T, step peak W MiB (P % vs
    predicted), recomputed N ops, plan S s

- predicted peak: the plan's live bytes at its peak (``schedule.live_peak``, workspaces measured on the device);
- max_memory_allocated / max_memory_reserved: ``torch.cuda``'s peak statistics over one planned step (forward and
  backward; reset just before it), everything on the device included (weights, inputs, cuBLAS's workspace); "n/a"
  on the CPU;
- step peak: the bytes resident before the step (weights, buffers, inputs) plus the rise of the allocated bytes over
  the step (the allocator's statistics on CUDA, the profiler's CPU events on the CPU): the figure a plan predicts;
- grads: the planned step's gradients, as max over parameters of max |a - b| / max |b|, against the unplanned step's
  (eager PyTorch with the same seed; dropout draws the same masks, docs/torch.md): "yes" at most TOLERANCE (1e-3:
  on CUDA eager runs other kernels than the graph for some ops, cuDNN's batch norm where the graph has ATen's, and
  convolutions use TF32 by default, which this script leaves alone), and against the store-all plan's step (the
  same executor and kernels: "yes" at most STORE_ALL_TOLERANCE, 1e-5; "-" on the store-all row). cuDNN is asked
  for deterministic algorithms;
- ms/step: median of --repeats planned steps after a warm-up (device synchronised around each).
A row that fails prints "torch MODEL BUDGET: error: TYPE: message" and the others still run. A header line
("torch-gpu: torch ..., device ...") comes first. Exit status: 0, 1 when a row failed or its grads differ, 77
("skipped: no CUDA device") with --device cuda on a machine without one.

    build/venv/bin/python bench/torch/gpu.py [--device cuda|cpu] [--models resnet50,gpt2] [--time-limit 10]
        [--out DIR] [--repeats 5] [--batch 32] [--image 224]

Models: torchvision's ResNet-50 (batch 32 at 224x224, 1000 classes) and the tiny GPT-2 of the tests
(python/tests/models.py: 2 layers, d 128, 4 heads, vocabulary 2000, dropout 0.1; 4 x 256 tokens).
"""
from __future__ import annotations

import argparse
import copy
import gc
import importlib.metadata
import json
import os
import platform
import sys
import time

from common import ROOT

import torch

TOLERANCE = 1e-3            # against eager PyTorch
STORE_ALL_TOLERANCE = 1e-5  # against the store-all plan's step (the same executor)
BUDGETS = (None, 0.5)


def version(dist: str) -> str:
    try:
        return importlib.metadata.version(dist)
    except importlib.metadata.PackageNotFoundError:
        return "absent"


def header(dev: torch.device) -> dict:
    h = {"torch": torch.__version__, "torchvision": version("torchvision"), "transformers": version("transformers"),
         "python": platform.python_version(), "device": str(dev), "cpu_threads": torch.get_num_threads(),
         "memplan": os.environ.get("MEMPLAN", "")}
    if dev.type == "cuda":
        p = torch.cuda.get_device_properties(dev)
        h.update(device_name=p.name, device_memory_gib=round(p.total_memory / 2**30, 1),
                 capability=f"sm_{p.major}{p.minor}", cuda=torch.version.cuda,
                 cudnn=torch.backends.cudnn.version(), cudnn_deterministic=True)
    return h


def resnet50(batch: int, image: int):
    import torchvision
    torch.manual_seed(0)
    g = torch.Generator().manual_seed(0)
    return (torchvision.models.resnet50(), (torch.randn(batch, 3, image, image, generator=g),),
            (torch.randint(0, 1000, (batch,), generator=g),), None)


def tiny_gpt2(batch: int, image: int):
    import models
    return models.tiny_gpt2(dropout=0.1, batch=4, seq=256)


MODELS = {"resnet50": resnet50, "gpt2": tiny_gpt2}


def mib(b) -> str:
    return "-" if b is None else f"{b / 2**20:.1f}"


def cuda_mib(b) -> str:
    return "n/a" if b is None else f"{b / 2**20:.1f} MiB"


def rel(a, b) -> float:
    return max(((x - y).abs().max() / y.abs().max().clamp_min(1e-30)).item() for x, y in zip(a, b))


def clear_grads(model) -> None:
    for p in model.parameters():
        p.grad = None


def release(dev) -> None:
    gc.collect()
    if dev.type == "cuda":
        torch.cuda.empty_cache()


def grads_of(model) -> list:
    return [p.grad.detach().to("cpu", copy=True) for p in model.parameters()]


def reference_grads(case, dev) -> list:
    """The unplanned step's gradients: eager PyTorch on `dev`, seed 1 (what the planned steps are seeded with)."""
    import memplan_torch as mt
    model0, inputs, targets, loss_fn = case
    ref = copy.deepcopy(model0).to(dev)
    ref.train()
    torch.manual_seed(1)
    (loss_fn or mt.default_loss)(ref(*inputs), *targets).backward()
    out = grads_of(ref)
    del ref
    release(dev)
    return out


def planned_row(case, budget, want, store_all, dev, args) -> dict:
    import memplan_torch as mt
    from memplan_torch.probe import measure_step, storage_bytes, timed
    model0, inputs, targets, loss_fn = case
    model = copy.deepcopy(model0).to(dev)
    cm = mt.compile(model, budget, inputs, targets=targets, loss_fn=loss_fn, cost="roofline:h200",
                    time_limit=args.time_limit, budget_on="peak")

    def step():
        cm(*inputs, *targets).backward()

    clear_grads(model)
    torch.manual_seed(1)
    step()  # also the warm-up of what a first run allocates (cuBLAS's workspace)
    got = grads_of(model)
    diff = rel(got, want)
    diff_store_all = None if store_all is None else rel(got, store_all)
    clear_grads(model)  # before the measurement: freeing earlier gradients inside it would hide bytes
    release(dev)
    resident = storage_bytes(list(model.parameters()) + list(model.buffers()) + list(inputs) + list(targets))
    torch.manual_seed(1)
    m = measure_step(step, resident, dev)
    clear_grads(model)
    seconds = timed(lambda: (step(), clear_grads(model)), args.repeats, dev)
    s = cm.schedule
    row = {"predicted_peak": s.live_peak, "max_memory_allocated": m.max_allocated, "max_memory_reserved": m.max_reserved,
           "step_peak": m.peak, "grads_equal": diff <= TOLERANCE, "max_rel_diff": diff,
           "grads_equal_store_all": None if diff_store_all is None else diff_store_all <= STORE_ALL_TOLERANCE,
           "max_rel_diff_store_all": diff_store_all, "ms_per_step": seconds * 1e3,
           "recomputed_ops": len(s.recomputed), "saved_bytes": s.saved_bytes, "budget_bytes": cm.budget_bytes,
           "plan_seconds": cm.seconds["plan"], "compile_seconds": sum(cm.seconds.values()),
           "cost_model": cm.graph["cost_model"], "workspace": cm.graph["memplan_torch"]["workspace"]}
    del cm, model
    release(dev)
    return row, (got if budget is None else None)


def line(name: str, budget, r: dict) -> str:
    head = f"torch {name} {'store-all' if budget is None else budget}:"
    if "error" in r:
        return f"{head} error: {r['error']}"
    pct = (r["step_peak"] - r["predicted_peak"]) / r["predicted_peak"] * 100
    sa = "-" if r["grads_equal_store_all"] is None else \
        f"{'yes' if r['grads_equal_store_all'] else 'no'} (max rel diff {r['max_rel_diff_store_all']:.1e})"
    return (f"{head} predicted peak {mib(r['predicted_peak'])} MiB, max_memory_allocated {cuda_mib(r['max_memory_allocated'])}, "
            f"max_memory_reserved {cuda_mib(r['max_memory_reserved'])}, grads equal to unplanned: "
            f"{'yes' if r['grads_equal'] else 'no'} (max rel diff {r['max_rel_diff']:.1e}), to store-all: {sa}, "
            f"ms/step {r['ms_per_step']:.1f}, "
            f"step peak {mib(r['step_peak'])} MiB ({pct:+.2f} % vs predicted), recomputed {r['recomputed_ops']} ops, "
            f"plan {r['plan_seconds']:.1f} s")


def write(out_dir, result: dict) -> None:
    if not out_dir:
        return
    os.makedirs(out_dir, exist_ok=True)
    path = os.path.join(out_dir, "torch_gpu.json")
    with open(path + ".tmp", "w") as f:
        json.dump(result, f, indent=1)
    os.replace(path + ".tmp", path)


def error_text(e: BaseException) -> str:
    return f"{type(e).__name__}: {' '.join(str(e).split())}"[:400]


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--device", default="cuda", choices=("cuda", "cpu"))
    ap.add_argument("--models", default="resnet50,gpt2", help=f"comma-separated: {', '.join(MODELS)}")
    ap.add_argument("--time-limit", type=float, default=10.0, help="memplan's time limit per plan (seconds)")
    ap.add_argument("--out", help="a folder: torch_gpu.json (header and rows) is written there after each row")
    ap.add_argument("--repeats", type=int, default=5, help="timed steps per row (after a warm-up)")
    ap.add_argument("--batch", type=int, default=32, help="ResNet-50's batch (default 32)")
    ap.add_argument("--image", type=int, default=224, help="ResNet-50's image side (default 224)")
    args = ap.parse_args(argv)
    names = [n for n in args.models.split(",") if n]
    unknown = [n for n in names if n not in MODELS]
    if unknown:
        ap.error(f"unknown model(s) {', '.join(unknown)} (known: {', '.join(MODELS)})")
    if args.device == "cuda" and not torch.cuda.is_available():
        print("skipped: no CUDA device", flush=True)
        return 77
    dev = torch.device("cuda", torch.cuda.current_device()) if args.device == "cuda" else torch.device("cpu")
    if dev.type == "cuda":
        # The same cuDNN algorithms in every step, so that the steps differ only where their kernels do. TF32
        # is left as PyTorch sets it: its flags' legacy and new APIs refuse to be mixed in recent versions.
        torch.backends.cudnn.deterministic = True
        torch.backends.cudnn.benchmark = False
    os.environ.setdefault("MEMPLAN", os.path.join(ROOT, "build", "bin", "memplan"))
    h = header(dev)
    print("torch-gpu: " + ", ".join(f"{k} {v}" for k, v in h.items()), flush=True)
    result = {"header": h, "tolerance": TOLERANCE, "store_all_tolerance": STORE_ALL_TOLERANCE, "budget_on": "peak",
              "rows": []}
    write(args.out, result)
    failed = False
    t_all = time.perf_counter()
    for name in names:
        t0 = time.perf_counter()
        want = store_all = None
        try:
            model0, inputs, targets, loss_fn = MODELS[name](args.batch, args.image)
            case = (model0, tuple(t.to(dev) for t in inputs), tuple(t.to(dev) for t in targets), loss_fn)
            want = reference_grads(case, dev)
        except Exception as e:
            case_error = f"the unplanned step failed: {error_text(e)}"
        for budget in BUDGETS:
            try:
                if want is None:
                    raise RuntimeError(case_error)
                r, grads = planned_row(case, budget, want, store_all, dev, args)
                if budget is None:
                    store_all = grads
            except Exception as e:
                r = {"error": error_text(e)}
                release(dev)
            failed |= "error" in r or not r["grads_equal"] or r["grads_equal_store_all"] is False
            print(line(name, budget, r), flush=True)
            result["rows"].append({"model": name, "budget": budget, **r})
            write(args.out, result)
        result.setdefault("model_seconds", {})[name] = round(time.perf_counter() - t0, 1)
        write(args.out, result)
    result["seconds"] = round(time.perf_counter() - t_all, 1)
    write(args.out, result)
    print(f"torch-gpu: done in {result['seconds']:.0f} s, {'some rows failed' if failed else 'all rows ok'}", flush=True)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
