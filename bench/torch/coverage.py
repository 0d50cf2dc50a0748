"""Which models memplan_torch covers: export, plan at a budget, train three steps with the plan.

    build/venv/bin/python bench/torch/coverage.py [--time-limit 2] [--budget 0.5] [--steps 3] [--out FILE] [MODEL ...]

One table row a model (each in a process of its own, see ``common.isolated``; one that fails prints its one-line
error and the others still run): the exported graph's ops and tensors, export seconds, the plan at ``budget``
(``budget_on="peak"`` first, ``"saved"`` when the peak budget is infeasible or memplan finds no plan for it in
the time limit; the row says which), its status and
overhead as memplan's report prints them and its planning seconds; then ``--steps`` SGD steps with
``memplan_torch.compile``'s module, each against the unplanned eager step from the same weights: the largest relative
difference of the loss and of any gradient (``max |a - b| / max |b|`` over parameters, over all steps; a gradient
below 1e-3 of the model's largest, such as fp32 round-off of a true zero, against that floor: ``common.grad_diff``),
and the planned step's measured CPU peak (``probe.peak_of``) against the plan's predicted live peak.

Hugging Face models at hf_families.py's tiny configurations (2 layers, hidden 256, vocabulary 4000, batch 2 x 128
tokens, dropout 0, ``loss_fn="model"``); torchvision models at batch 2, random weights, dropout and stochastic
depth 0, cross-entropy over 1000 classes, at the image size in ``TV`` (64x64; swin_t 112x112) or ``--image``'s."""
from __future__ import annotations

import argparse
import copy
import os
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)

from common import emit, grad_diff, isolated, log, planned_peak, rel, row_printer  # noqa: E402
from hf_families import FAMILIES, build  # noqa: E402

import torch  # noqa: E402
import torchvision  # noqa: E402

import memplan_torch as mt  # noqa: E402

HF = {"gpt2": "GPT2LMHeadModel", "llama": "LlamaForCausalLM", "qwen2": "Qwen2ForCausalLM",
      "mistral": "MistralForCausalLM", "bert": "BertForMaskedLM", "roberta": "RobertaForMaskedLM",
      "t5": "T5ForConditionalGeneration", "vit": "ViTForImageClassification"}
assert set(HF) == set(FAMILIES)
# torchvision: (factory keyword arguments that zero dropout / stochastic depth or size the model, image size);
# `make` zeroes the probability of any dropout and stochastic depth module left (swin_t takes no argument for it).
TV = {"resnet50": ({}, 64), "vit_b_16": ({"image_size": 64}, 64), "swin_t": ({}, 112),
      "convnext_tiny": ({"stochastic_depth_prob": 0.0}, 64),
      "efficientnet_b0": ({"dropout": 0.0, "stochastic_depth_prob": 0.0}, 64),
      "mobilenet_v3_small": ({"dropout": 0.0}, 64), "densenet121": ({}, 64), "regnet_y_400mf": ({}, 64)}
MODELS = [f"hf:{n}" for n in HF] + list(TV)
HEADER = ["model", "ops", "tensors", "export s", "budget on", "status", "overhead", "plan s", "loss rel diff",
          "grad rel diff", "peak MiB", "predicted MiB", "peak vs pred"]


def make(name: str, batch: int, image: int | None = None):
    """(model in train mode, inputs, targets, loss_fn, label) for `name`; torchvision's at `image` x `image`
    when given."""
    if name.startswith("hf:"):
        fam = name[3:]
        model, inputs, targets = build(fam, 256, 4000, batch, 128)
        size = f"b{batch}, 64x64" if fam == "vit" else f"b{batch}, 128 tokens"
        return model, inputs, targets, "model", f"{HF[fam]} ({size})"
    kwargs, size = TV[name]
    if image:
        kwargs, size = {**kwargs, **({"image_size": image} if "image_size" in kwargs else {})}, image
    torch.manual_seed(0)
    model = getattr(torchvision.models, name)(**kwargs).train()
    for m in model.modules():
        if isinstance(m, (torch.nn.Dropout, torchvision.ops.StochasticDepth)):
            m.p = 0.0
    g = torch.Generator().manual_seed(0)
    return (model, (torch.randn(batch, 3, size, size, generator=g),), (torch.randint(0, 1000, (batch,), generator=g),),
            None, f"{name} (b{batch}, {size}x{size})")


def planned(model, inputs, targets, loss_fn, budget, time_limit):
    """(compiled module, budget_on): the peak budget, or the saved budget where the peak's is infeasible or no plan
    for it is found in the time limit."""
    try:
        return mt.compile(model, budget, inputs, targets=targets, loss_fn=loss_fn, budget_on="peak",
                          time_limit=time_limit), "peak"
    except (mt.Infeasible, mt.NoPlan) as e:
        log(f"peak budget: {type(e).__name__} ({str(e).splitlines()[0]}); trying budget_on='saved'")
    return mt.compile(model, budget, inputs, targets=targets, loss_fn=loss_fn, budget_on="saved",
                      time_limit=time_limit), "saved"


def one(name: str, args) -> dict:
    """One model's row as a dict (raises on failure)."""
    model, inputs, targets, loss_fn, label = make(name, args.batch, args.image)
    ref = copy.deepcopy(model)
    t0 = time.perf_counter()
    cm, on = planned(model, inputs, targets, loss_fn, args.budget, args.time_limit)
    seconds = cm.seconds["plan"]
    row = {"label": label, "ops": len(cm.graph["ops"]), "tensors": len(cm.graph["tensors"]),
           "export": cm.seconds["export"], "on": on, "status": cm.report["status"],
           "overhead": f"{cm.report['overhead'] * 100:+.1f} %" if "overhead" in cm.report else "-", "plan": seconds}
    log(f"{name}: planned in {time.perf_counter() - t0:.1f} s; training {args.steps} steps")
    opt = torch.optim.SGD(model.parameters(), lr=args.lr)
    loss_diff, grad_worst, missing = 0.0, 0.0, 0
    for _ in range(args.steps):
        # Each step from the same weights and buffers: two runs that each follow their own round-off drift
        # apart over steps (batch norm over a few values amplifies it), which says nothing about the plan.
        ref.load_state_dict(model.state_dict())
        opt.zero_grad(set_to_none=True)
        ref.zero_grad(set_to_none=True)
        torch.manual_seed(1)
        loss = cm(*inputs, *targets)
        loss.backward()
        torch.manual_seed(1)
        ref_loss = mt.step_loss(ref, loss_fn or mt.default_loss, inputs, targets)
        ref_loss.backward()
        loss_diff = max(loss_diff, rel(loss.detach(), ref_loss.detach()))
        worst, gone = grad_diff(model, ref)
        grad_worst, missing = max(grad_worst, worst), max(missing, gone)
        opt.step()
    del ref
    peak = planned_peak(cm, inputs, targets)
    row.update(loss=loss_diff, grad=grad_worst, missing=missing, peak=peak, pred=cm.schedule.live_peak)
    return row


def cells(name: str, r: dict) -> list[str]:
    if "error" in r:
        return [name, "-", "-", "-", "-", "FAILED", r["error"].replace("|", "/")] + ["-"] * (len(HEADER) - 7)
    grad = f"{r['grad']:.1e}" + (f" ({r['missing']} missing)" if r["missing"] else "")
    return [r["label"], str(r["ops"]), str(r["tensors"]), f"{r['export']:.1f}", r["on"], r["status"], r["overhead"],
            f"{r['plan']:.1f}", f"{r['loss']:.1e}", grad, f"{r['peak'] / 2**20:.2f}", f"{r['pred'] / 2**20:.2f}",
            f"{100 * (r['peak'] / r['pred'] - 1):+.2f} %"]


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("models", nargs="*", default=MODELS, help=f"(default: all) {' '.join(MODELS)}; "
                    "the Hugging Face models also as hf (all eight) or without hf:, torchvision as tv")
    ap.add_argument("--time-limit", type=float, default=2.0, help="memplan's planning time limit (s)")
    ap.add_argument("--budget", type=float, default=0.5)
    ap.add_argument("--batch", type=int, default=2)
    ap.add_argument("--image", type=int, help="torchvision models at this image size (default: TV's)")
    ap.add_argument("--steps", type=int, default=3)
    ap.add_argument("--lr", type=float, default=0.01)
    ap.add_argument("--out", help="also write the table (markdown) to this file, a row as it is known")
    ap.add_argument("--one", action="store_true", help=argparse.SUPPRESS)  # a child process: one model
    args = ap.parse_args()
    if args.one:
        try:
            emit(one(args.models[0], args))
        except Exception as e:  # noqa: BLE001 - the row says what failed
            msg = str(e).strip().splitlines()
            emit({"error": f"{type(e).__name__}: {msg[0] if msg else ''}"[:300]})
        return
    names = []
    for n in args.models:
        names += ([f"hf:{f}" for f in HF] if n == "hf" else list(TV) if n == "tv"
                  else [f"hf:{n}"] if n in HF else [n])
    for n in names:
        if n not in MODELS:
            raise SystemExit(f"unknown model '{n}' (known: {' '.join(MODELS)})")
    child = [f"--time-limit={args.time_limit}", f"--budget={args.budget}", f"--batch={args.batch}",
             f"--steps={args.steps}", f"--lr={args.lr}", "--one"] + ([f"--image={args.image}"] if args.image else [])
    put = row_printer(HEADER, args.out)
    for n in names:
        log(f"{n}: starting")
        try:
            r = isolated(os.path.abspath(__file__), [n, *child])
        except Exception as e:  # noqa: BLE001 - a failing model must not stop the others
            r = {"error": str(e).splitlines()[0] if str(e) else type(e).__name__}
        put(cells(n, r))


if __name__ == "__main__":
    main()
