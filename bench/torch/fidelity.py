"""Export fidelity: the exported graph's default-schedule lower bound against the peak PyTorch reaches
running the same functional graph (aot_autograd, default partition, FX graphs run as Python, no code
generation; peak = resident bytes + the largest running sum of the CPU allocator's events, from the
profiler), parameter counts, and the same step in eager PyTorch (its peak, and its bytes saved for the
backward counted by saved-tensor hooks, against the functional graph's).

    build/venv/bin/python bench/torch/fidelity.py [--models resnet50,mobilenet_v2,vgg16,gpt2]
"""
import argparse
import time

import torch
from torch._functorch.partitioners import default_partition

from common import LABEL, MODELS, clear_grads, log, mib, table

import memplan_torch as mt
from memplan_torch import command
from memplan_torch.probe import aot_step, peak_of, saved_bytes_of, storage_bytes


def eager(model, inputs, targets, loss_fn):
    saved = {}

    def pack(t):
        s = t.untyped_storage()
        saved[s.data_ptr()] = s.nbytes()
        return t

    def step():
        with torch.autograd.graph.saved_tensors_hooks(pack, lambda t: t):
            loss = loss_fn(model(*inputs), *targets)
        loss.backward()
        return loss

    step()
    clear_grads(model)
    resident = storage_bytes(list(model.parameters()) + list(model.buffers()) + list(inputs) + list(targets))
    params = {p.untyped_storage().data_ptr() for p in model.parameters()} | \
             {t.untyped_storage().data_ptr() for t in inputs}
    saved.clear()
    peak = peak_of(step, resident)[0]
    clear_grads(model)
    return peak, sum(b for k, b in saved.items() if k not in params)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--models", default="resnet50,mobilenet_v2,vgg16,gpt2")
    args = ap.parse_args()
    rows = []
    for name in args.models.split(","):
        model, inputs, targets, loss_fn = MODELS[name]()
        loss_fn = loss_fn or mt.default_loss
        log(f"{name}: export")
        t0 = time.perf_counter()
        g = mt.export(model, inputs, loss_fn, targets=targets, name=name)
        t_export = time.perf_counter() - t0
        lb = command.stats(g)["lb_default"]
        n_params = sum(p.numel() for p in model.parameters())
        log(f"{name}: aot_autograd default partition")
        cap = {}
        step = aot_step(model, inputs, targets, loss_fn, default_partition, cap)
        step()
        clear_grads(model)
        resident = storage_bytes(list(model.parameters()) + list(model.buffers()) + list(inputs) + list(targets))
        measured = peak_of(step, resident)[0]
        clear_grads(model)
        fn_saved = saved_bytes_of(cap)
        log(f"{name}: eager")
        e_peak, e_saved = eager(model, inputs, targets, loss_fn)
        rows.append([LABEL[name], f"{g['memplan_torch']['parameters']} / {n_params}", mib(lb), mib(measured),
                     f"{(lb - measured) / measured * 100:+.2f} %", mib(e_peak),
                     f"{(e_peak - measured) / measured * 100:+.1f} %", mib(fn_saved), mib(e_saved),
                     f"{(e_saved - fn_saved) / fn_saved * 100:+.1f} %", f"{t_export:.1f}"])
        del model, inputs, targets, g, cap, step
    table(["model", "parameters (graph / torch)", "LB default (MiB)", "aot peak (MiB)", "LB vs aot",
           "eager peak (MiB)", "eager vs aot", "saved, functional (MiB)", "saved, eager (MiB)",
           "eager vs functional", "export (s)"], rows)


if __name__ == "__main__":
    main()
