"""The vocabulary of a training step: its optimizers, workspaces and losses, the autocast it runs under, and
``Joint``, the step traced into aot_autograd's joint graph with what each placeholder and output is.

A step is ``loss_fn(model(*inputs), *targets)``, its backward, and an optimizer's update.
"""
from __future__ import annotations

import contextlib
import dataclasses
from typing import Sequence

import torch
import torch.fx

OPTIMIZERS = ("sgd", "adam", "adamw")
WORKSPACES = ("measured", "cpu", "cuda", "none")
MODEL_LOSS = "model"    # loss_fn: the model computes its own loss (``model(*inputs, labels=target).loss``)


class ExportError(ValueError):
    """The model or its step cannot be exported (the message names the node or argument)."""


@dataclasses.dataclass
class Joint:
    """The traced step: aot_autograd's joint graph and what each placeholder and output is."""
    gm: torch.fx.GraphModule
    params: dict            # placeholder name -> parameter FQN
    buffers: dict           # placeholder name -> buffer FQN
    inputs: list            # placeholder names of the step's inputs, in order
    loss: str               # node name of the loss
    seed: str | None        # node name of the backward's seed (ones_like of the loss)
    mutations: dict         # output node name -> buffer FQN it is copied into
    grads: dict             # output node name -> parameter FQN
    param_tensors: dict     # FQN -> the module's parameter
    buffer_tensors: dict    # FQN -> the module's buffer
    # get_attr node name -> the GraphModule attribute it reads: tensors the trace lifted as constants
    # (a `torch.tensor(...)` made in the forward, a plain tensor attribute), persistent and read-only
    constants: dict = dataclasses.field(default_factory=dict)
    # parameter FQN -> why it has no gradient: "unused" (no path from it to the loss, like BERT's pooler
    # under a masked-LM head) or "frozen" (requires_grad=False, the user's choice: LoRA's base weights)
    no_grad: dict = dataclasses.field(default_factory=dict)
    # the autocast the step was traced under: ((device type, dtype), ...); its casts are nodes of `gm`
    autocast: tuple = ()
    # A joint graph that is not a whole training step (the one aot_autograd hands a partitioner): the nodes
    # whose ancestors are the forward (default: the loss and the mutations), the nodes whose values the
    # graph returns (default: those and the gradients), and the placeholders the backward receives from
    # autograd (each made by a zero-cost backward op "tangent" that reads the forward's outputs).
    forward_roots: list | None = None
    outputs: list | None = None
    tangents: list = dataclasses.field(default_factory=list)
    # False: the outputs of random forward ops (dropout) are kept to the end of the step, so that no plan
    # recomputes them (a runner that cannot replay a random op's generator state would draw another mask)
    recompute_random: bool = True

    def placeholder_values(self, step_inputs: Sequence) -> list:
        """The graph's arguments: parameters, buffers, then the step's inputs, in placeholder order."""
        args = []
        it = iter(step_inputs)
        for n in self.gm.graph.nodes:
            if n.op != "placeholder":
                continue
            if n.name in self.params:
                args.append(self.param_tensors[self.params[n.name]].detach())
            elif n.name in self.buffers:
                args.append(self.buffer_tensors[self.buffers[n.name]].detach())
            else:
                args.append(next(it))
        return args


def default_loss(out, *targets):
    """Cross-entropy of the model's output (a Hugging Face output's logits, a tuple's first) against
    ``targets[0]``, flattened over the sequence for outputs of more than two dimensions; without targets,
    the output's sum (in float32)."""
    if not isinstance(out, torch.Tensor):
        logits = out.get("logits") if isinstance(out, dict) else getattr(out, "logits", None)
        out = logits if logits is not None else out[0] if isinstance(out, (tuple, list)) and out else out
    if targets:
        t = targets[0]
        if out.dim() > 2:
            return torch.nn.functional.cross_entropy(out.reshape(-1, out.shape[-1]), t.reshape(-1))
        return torch.nn.functional.cross_entropy(out, t)
    return out.float().sum()


def step_loss(model: torch.nn.Module, loss_fn, inputs: Sequence, targets: Sequence = ()):
    """The training step's loss as eager PyTorch computes it: ``loss_fn(model(*inputs), *targets)``, or with
    ``loss_fn="model"`` the model's own, ``model(*inputs, labels=targets[0]).loss`` (Hugging Face's
    convention; ``model(*inputs).loss`` without targets). ``loss_fn=None`` is ``default_loss``."""
    if isinstance(loss_fn, str):
        if loss_fn != MODEL_LOSS:
            raise ExportError(f"loss_fn '{loss_fn}': expected a callable, None or '{MODEL_LOSS}' (the model's own loss)")
        if len(targets) > 1:
            raise ExportError(f"loss_fn='{MODEL_LOSS}' passes one target to the model, as labels=; got {len(targets)} "
                              "(wrap the model in a module that takes them)")
        out = model(*inputs, labels=targets[0]) if targets else model(*inputs)
        loss = out.get("loss") if isinstance(out, dict) else getattr(out, "loss", None)
        if loss is None:
            raise ExportError(f"loss_fn='{MODEL_LOSS}': {type(model).__name__} returned {type(out).__name__} without "
                              "a loss; a Hugging Face model computes one when given labels: pass them as "
                              "targets=(labels,)")
        return loss
    return (loss_fn or default_loss)(model(*inputs), *targets)


AUTOCAST_DEVICES = ("cpu", "cuda")


def autocast_state() -> tuple:
    """The autocast in effect: ((device type, dtype), ...) for each device type it is enabled on."""
    return tuple((d, torch.get_autocast_dtype(d)) for d in AUTOCAST_DEVICES if torch.is_autocast_enabled(d))


@contextlib.contextmanager
def autocast_as(state: tuple = ()):
    """Autocast exactly as `state` says (`()`: off on every device), whatever is in effect around it."""
    want = dict(state)
    with contextlib.ExitStack() as stack:
        for d in AUTOCAST_DEVICES:
            if d in want:
                stack.enter_context(torch.autocast(d, dtype=want[d]))
            elif torch.is_autocast_enabled(d):
                stack.enter_context(torch.autocast(d, enabled=False))
        yield


def check_options(optimizer: str | None, workspace: str | None = None) -> None:
    """Raises ExportError naming an optimizer or a workspace mode this package does not know."""
    if optimizer is not None and optimizer not in OPTIMIZERS:
        raise ExportError(f"unknown optimizer '{optimizer}' (known: {', '.join(OPTIMIZERS)})")
    if workspace is not None and workspace not in WORKSPACES:
        raise ExportError(f"workspace '{workspace}': expected {', '.join(WORKSPACES)}")
