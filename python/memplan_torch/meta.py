"""Planning without the memory: a model built on the meta device, exported through fake tensors.

A model built under ``with torch.device("meta")`` has parameters with shapes and dtypes and no data,
so an 8B-parameter model costs nothing to build. aot_autograd cannot trace it as it is (with meta
parameters ``aot_export_module(..., trace_joint=True)`` fails inside PyTorch: "Found a parameter that
did not receive a gradient"), but it traces fake tensors on a real device type: the model's meta
parameters, buffers and tensor attributes, and the meta example inputs and targets, become fake tensors
on ``fake_device`` (``cpu`` by default) for the length of the trace (``memplan_torch.fake``, which traces
a model on real tensors the same way, their fakes on their own device). Fake tensors carry no data, so
nothing is allocated.

No kernel runs, so nothing is measured: costs come from a model of a named device
(``roofline:DEVICE``, ``fused:DEVICE``; or ``flops``), and workspaces are not measured
(``workspace`` "measured", the default, means "none" here; the graph records ``"none"``).
"""
from __future__ import annotations

from typing import Callable, Sequence

import torch

from . import costs as _costs
from . import device as _device
from .fake import faked
from .export import OPTIMIZERS, WORKSPACES, ExportError, _default_loss, build_graph, trace


def _is_meta(t) -> bool:
    return isinstance(t, torch.Tensor) and t.device.type == "meta"


def is_meta(model: torch.nn.Module, tensors: Sequence = ()) -> bool:
    """Whether the model or any of `tensors` (example inputs, targets) lives on the meta device."""
    return any(_is_meta(t) for t in list(model.parameters()) + list(model.buffers()) + list(tensors))


def check(model: torch.nn.Module, example_inputs: Sequence, targets: Sequence = ()) -> None:
    """Raises ExportError naming the first tensor that is not on the meta device, when some of the model's
    parameters, buffers, example inputs and targets are meta and others are not (a meta model needs meta
    example inputs, and the other way round)."""
    named = [(f"parameter '{k}'", v) for k, v in model.named_parameters()]
    named += [(f"buffer '{k}'", v) for k, v in model.named_buffers()]
    named += [(f"input {i}", v) for i, v in enumerate(example_inputs)]
    named += [(f"target {i}", v) for i, v in enumerate(targets)]
    named = [(what, v) for what, v in named if isinstance(v, torch.Tensor)]
    meta = [what for what, v in named if _is_meta(v)]
    real = [(what, v.device) for what, v in named if not _is_meta(v)]
    if meta and real:
        what, dev = real[0]
        raise ExportError(
            f"{meta[0]} is on the meta device but {what} is on {dev}: a model built on the meta device is "
            "exported with meta example inputs and targets (torch.empty(shape, dtype=..., device='meta')), "
            "and every parameter and buffer on meta (build it under `with torch.device('meta')`)")


def export_with_mapping(model: torch.nn.Module, example_inputs: Sequence, loss_fn: Callable | None = None,
                        optimizer: str = "sgd", targets: Sequence = (), cost: str = "roofline:v100",
                        name: str | None = None, workspace: str = "measured",
                        progress: Callable[[str], None] | None = None, fake_device="cpu"):
    """`export.export_with_mapping` for a model on the meta device: the same graph as the model on real
    tensors of `fake_device`'s type would give (same ops, tensors and bytes), with modelled costs. The
    joint graph's parameters are fake tensors (the mapping is for inspection: a meta model cannot run)."""
    check(model, example_inputs, targets)
    kind, _ = _costs.parse(cost)
    if kind == "measured":
        raise ExportError(f"cost '{cost}': measured costs time kernels on real tensors, and a model on the meta "
                          "device has none: use a device model, e.g. roofline:h100 or fused:h100 "
                          f"(devices: {', '.join(_costs.DEVICES)})")
    if optimizer not in OPTIMIZERS:
        raise ExportError(f"unknown optimizer '{optimizer}' (known: {', '.join(OPTIMIZERS)})")
    if workspace not in WORKSPACES:
        raise ExportError(f"workspace '{workspace}': expected {', '.join(WORKSPACES)}")
    if workspace in ("cpu", "cuda"):
        raise ExportError(f"workspace '{workspace}': workspaces are measured by running kernels, and a model on "
                          "the meta device runs none: use 'none' (the default for meta models)")
    try:
        fake_device = torch.device(fake_device)
    except RuntimeError as e:
        raise ExportError(f"fake device '{fake_device}': {e}") from None
    if fake_device.type not in ("cpu", "cuda"):
        raise ExportError(f"fake device '{fake_device}': a meta model is traced as fake cpu or cuda tensors")
    if fake_device.type == "cuda" and not torch.cuda.is_available():
        # No kernel runs, but PyTorch's CUDA dispatch (attention's kernel choice) asks the device.
        raise ExportError(f"fake device '{fake_device}': tracing fake CUDA tensors needs a CUDA device that PyTorch "
                          "sees; use 'cpu'")
    loss_fn = loss_fn or _default_loss
    if progress:
        progress(f"tracing the training step on fake {fake_device.type} tensors (aot_autograd)")
    # Only the CPU's generator: a fake CUDA trace must not touch a CUDA device (there may be none).
    with _device.preserved_rng([]), faked(model, example_inputs, targets, fake_device) as (_, inputs, tgts):
        joint = trace(model, inputs, loss_fn, tgts)
        if progress:
            progress(f"building the memplan graph ({len(joint.gm.graph.nodes)} FX nodes)")
        g, mapping = build_graph(joint, optimizer, cost, name or f"{type(model).__name__.lower()}-train")
    g["cost_model"] = cost
    g["memplan_torch"]["workspace"] = "none"
    g["memplan_torch"]["device"] = "meta"
    g["memplan_torch"]["traced_as"] = f"fake:{fake_device.type}"
    return g, joint, mapping
