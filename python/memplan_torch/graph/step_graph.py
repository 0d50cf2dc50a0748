"""A model's training step as a memplan.graph, with the joint graph it was lowered from and the names that
map one onto the other: trace, measure, lower. What ``export`` returns and what ``compile`` runs.

A model on a real device is traced on fake stand-ins of its tensors, then its costs (``measured``) and its
ops' workspaces are measured by running the joint graph on its real tensors.

A model built on the meta device (``with torch.device("meta")``: shapes and dtypes, no data, so an
8B-parameter model costs nothing to build) is traced as fake tensors of ``fake_device``'s type (``cpu`` by
default): aot_autograd cannot trace meta parameters as they are ("Found a parameter that did not receive a
gradient"). No kernel runs, so nothing is measured: costs come from a device model (``roofline:DEVICE``,
``fused:DEVICE`` or ``flops``), and workspaces are not measured (the graph records ``"none"``).
"""
from __future__ import annotations

from typing import Callable, NamedTuple, Sequence

import torch

from .. import costs
from .. import device as _device
from ..step.fake import faked
from ..step.joint import ExportError, Joint, autocast_as, check_options, default_loss
from ..step.trace import trace, trace_fake
from ..workspaces import node_workspaces
from .lower import Mapping, build_graph


class ExportedStep(NamedTuple):
    graph: dict         # the memplan.graph
    joint: Joint        # the traced step it was lowered from
    mapping: Mapping    # how the graph's names map onto the joint graph's


def is_meta(model: torch.nn.Module, tensors: Sequence = ()) -> bool:
    """Whether the model or any of `tensors` (example inputs, targets) lives on the meta device."""
    return any(isinstance(t, torch.Tensor) and t.device.type == "meta"
               for t in list(model.parameters()) + list(model.buffers()) + list(tensors))


def _check_all_meta(model: torch.nn.Module, example_inputs: Sequence, targets: Sequence) -> None:
    """Raises ExportError naming the first tensor that is not on the meta device, when some of the model's
    parameters, buffers, example inputs and targets are meta and others are not."""
    named = [(f"parameter '{k}'", v) for k, v in model.named_parameters()]
    named += [(f"buffer '{k}'", v) for k, v in model.named_buffers()]
    named += [(f"input {i}", v) for i, v in enumerate(example_inputs)]
    named += [(f"target {i}", v) for i, v in enumerate(targets)]
    named = [(what, v) for what, v in named if isinstance(v, torch.Tensor)]
    meta = [what for what, v in named if v.device.type == "meta"]
    real = [(what, v.device) for what, v in named if v.device.type != "meta"]
    if meta and real:
        what, dev = real[0]
        raise ExportError(
            f"{meta[0]} is on the meta device but {what} is on {dev}: a model built on the meta device is "
            "exported with meta example inputs and targets (torch.empty(shape, dtype=..., device='meta')), "
            "and every parameter and buffer on meta (build it under `with torch.device('meta')`)")


def _export_meta(model, example_inputs, loss_fn, optimizer, targets, cost, name, workspace, progress,
                 fake_device) -> ExportedStep:
    """The same graph as the model on real tensors of `fake_device`'s type would give (same ops, tensors and
    bytes), with modelled costs. The joint graph's parameters are fake tensors (for inspection only)."""
    _check_all_meta(model, example_inputs, targets)
    if costs.parse(cost)[0] == "measured":
        raise ExportError(f"cost '{cost}': measured costs time kernels on real tensors, and a model on the meta "
                          "device has none: use a device model, e.g. roofline:h100 or fused:h100 "
                          f"(devices: {', '.join(costs.DEVICES)})")
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
    if progress:
        progress(f"tracing the training step on fake {fake_device.type} tensors (aot_autograd)")
    # Only the CPU's generator: a fake CUDA trace must not touch a CUDA device (there may be none).
    with _device.preserved_rng([]), faked(model, example_inputs, targets, fake_device) as (_, inputs, tgts):
        joint = trace(model, inputs, loss_fn, tgts)
        if progress:
            progress(f"building the memplan graph ({len(joint.gm.graph.nodes)} FX nodes)")
        g, mapping = build_graph(joint, optimizer, cost, name)
    g["memplan_torch"].update(workspace="none", device="meta", traced_as=f"fake:{fake_device.type}")
    return ExportedStep(g, joint, mapping)


def _export_real(model, example_inputs, loss_fn, optimizer, targets, cost, name, workspace,
                 progress) -> ExportedStep:
    if progress:
        progress("tracing the training step (aot_autograd)")
    try:
        dev = _device.of(list(model.parameters()) + list(model.buffers()) + list(example_inputs) + list(targets))
    except ValueError as e:
        raise ExportError(str(e)) from None
    if workspace in ("cpu", "cuda") and dev.type != workspace:
        raise ExportError(f"workspace '{workspace}': the model's tensors are on {dev}; workspaces are measured "
                          f"where they are (use 'measured' or '{dev.type}', or move the model)")
    cost_label, timed = cost, costs.parse(cost)[0] == "measured"
    if timed:
        try:
            cost_label = costs.measured_on(cost, dev)
        except ValueError as e:
            raise ExportError(str(e)) from None
    # Tracing draws from the CPU's generator: the caller's random streams are left as they were.
    with _device.preserved_rng([dev]):
        joint = trace_fake(model, example_inputs, loss_fn, targets)
    args = joint.placeholder_values(tuple(example_inputs) + tuple(targets))
    measured = workspaces = None
    if timed:
        with autocast_as(()):  # the graph holds the casts of the autocast it was traced under
            measured = costs.measure_node_times(joint.gm, args, progress=progress)
    if workspace != "none":
        if progress:
            progress(f"measuring workspaces on {dev}" + (" (a warm-up run, then a measured one)" if dev.type == "cuda"
                                                           else " (one run)"))
        with autocast_as(()):
            workspaces = node_workspaces(joint.gm, args)
    g, mapping = build_graph(joint, optimizer, cost, name, measured, workspaces)
    g["cost_model"] = cost_label
    g["memplan_torch"].update(workspace="none" if workspace == "none" else "measured:" + _device.label(dev),
                              device=_device.label(dev))
    return ExportedStep(g, joint, mapping)


def export_step(model: torch.nn.Module, example_inputs: Sequence, loss_fn: Callable | str | None = None,
                optimizer: str = "sgd", targets: Sequence = (), cost: str = "roofline:v100", name: str | None = None,
                workspace: str = "measured", progress: Callable[[str], None] | None = None,
                fake_device="cpu") -> ExportedStep:
    """`export`'s graph, with the joint graph and the mapping (what `compile` runs). Arguments as `export`'s;
    `fake_device`: the device type a meta model's fake tensors take while it is traced."""
    costs.parse(cost)
    check_options(optimizer, workspace)
    loss_fn = loss_fn or default_loss
    name = name or f"{type(model).__name__.lower()}-train"
    export = _export_meta if is_meta(model, tuple(example_inputs) + tuple(targets)) else _export_real
    extra = (fake_device,) if export is _export_meta else ()
    return export(model, example_inputs, loss_fn, optimizer, targets, cost, name, workspace, progress, *extra)
