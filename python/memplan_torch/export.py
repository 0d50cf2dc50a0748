"""Door 1: a PyTorch training step as a ``memplan.graph``, to plan with the ``memplan`` command.

    g = memplan_torch.export(model, (x,), targets=(y,), optimizer="adamw", cost="roofline:h100")
    memplan_torch.command.write_json(g, "step.json")      # then: memplan plan step.json --budget 50%

The step (forward, loss, backward) is traced by aot_autograd into one joint graph on fake tensors, its costs
and workspaces are measured on the model's device, and it is lowered to memplan's buffers and ops with the
optimizer's update ops (``graph.step_graph``, ``graph.lower``). A model built on the meta device is exported
without memory: fake tensors throughout, costs from a device model.
"""
from __future__ import annotations

from typing import Callable, Sequence

import torch

from .graph.step_graph import export_step


def export(model: torch.nn.Module, example_inputs: Sequence, loss_fn: Callable | str | None = None,
           optimizer: str = "sgd", targets: Sequence = (), cost: str = "roofline:v100", name: str | None = None,
           workspace: str = "measured", progress: Callable[[str], None] | None = None) -> dict:
    """The training step of `model` on `example_inputs` as a memplan.graph (a dict; write it with json.dump).

    The step is ``loss_fn(model(*example_inputs), *targets)``, its backward, and `optimizer`'s update
    ("sgd", "adam" or "adamw"). ``loss_fn`` defaults to cross-entropy against ``targets[0]`` (a sum without
    targets); ``loss_fn="model"``: the model's own loss, ``model(*example_inputs, labels=targets[0]).loss``
    (Hugging Face's convention). Called inside ``torch.autocast``, the step is traced under it.
    ``cost``: "roofline:v100" (default), "roofline:h200", "fused:DEVICE", "measured" (each node timed on the
    device of the model's tensors; "measured:cpu" / "measured:cuda" insist on that device) or "flops"
    (PyTorch's partitioner's estimate: matrix FLOPs, other ops 1; unit "flop").
    ``workspace``: "measured" (default): each op's temporaries (what it allocates beyond its outputs),
    measured on the device of the model's tensors by one run of the step (after a warm-up run on CUDA;
    ``"cpu"`` or ``"cuda"``: the same, insisting on that device); "none": no workspaces. The graph records
    where costs and workspaces were measured (``cost_model`` "measured:cuda:NVIDIA H200",
    ``memplan_torch.workspace``).
    A model on the meta device (and meta example inputs and targets) is exported through fake tensors: the
    same graph as on the CPU, costs from ``cost``'s device model, no workspaces.
    Raises ``ExportError`` naming the module, node or argument at fault."""
    return export_step(model, example_inputs, loss_fn, optimizer, targets, cost, name, workspace, progress).graph
