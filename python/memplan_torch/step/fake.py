"""Fake tensors in place of a model's own, for the length of a trace.

aot_autograd traces the values it is given: real tensors run every kernel of the forward and the
backward while the graph is recorded (a ResNet-50 at batch 32 takes as long to trace as to train a
step, twice over), meta tensors make it fail inside PyTorch ("Found a parameter that did not receive
a gradient"). Fake tensors carry shapes, strides, dtypes and devices and no data, so the trace runs no
kernel and allocates nothing, whatever the batch. ``faked`` puts a ``FakeTensor`` in place of every
parameter, buffer and tensor attribute of a model and of every example input and target, all under
one ``FakeTensorMode`` (a tied weight stays one tensor), and puts the model's own tensors back on exit.
A real tensor's fake lives on the real tensor's device; a meta tensor's on ``meta_device``.

The fake tensor mode and a module's own tables of tensors are private PyTorch names, reached through
``_compat``.
"""
from __future__ import annotations

import contextlib
from typing import Sequence

import torch

from .. import _compat


def _tensor_attributes(model: torch.nn.Module):
    """(module, attribute name, tensor) of tensors held as plain attributes (not parameters or buffers):
    constants a trace reads through get_attr."""
    for mod in model.modules():
        for k, v in vars(mod).items():
            if isinstance(v, torch.Tensor) and not isinstance(v, torch.nn.Parameter):
                yield mod, k, v


class Swap:
    """Puts fake tensors in place of a model's tensors, remembers which is which, and puts them back."""

    def __init__(self, mode, meta_device):
        self.mode, self.meta_device = mode, torch.device(meta_device)
        self.memo: dict = {}      # id(own tensor) -> its fake tensor (tied weights stay tied)
        self.own: dict = {}       # id(fake tensor) -> the tensor it stands for
        self.undo: list = []      # (dict, key, own tensor) to put back

    def fake(self, t: torch.Tensor) -> torch.Tensor:
        if id(t) in self.memo:
            return self.memo[id(t)]
        device = self.meta_device if t.device.type == "meta" else t.device
        with self.mode:  # a factory under the mode makes a fake tensor: no data is allocated
            f = torch.empty_strided(t.shape, t.stride(), dtype=t.dtype, device=device)
        if isinstance(t, torch.nn.Parameter):
            f = torch.nn.Parameter(f, requires_grad=t.requires_grad)
        self.memo[id(t)] = f
        self.own[id(f)] = t
        return f

    def real(self, v):
        """The tensor `v` stands for, when `v` is one of this swap's fakes; else `v`."""
        return self.own.get(id(v), v)

    def replace(self, table: dict, key: str) -> None:
        t = table[key]
        self.undo.append((table, key, t))
        table[key] = self.fake(t)

    def restore(self) -> None:
        for table, key, t in reversed(self.undo):
            table[key] = t
        self.undo.clear()


@contextlib.contextmanager
def faked(model: torch.nn.Module, example_inputs: Sequence, targets: Sequence = (), meta_device="cpu"):
    """Within: `model`'s parameters, buffers and tensor attributes are fake tensors (one FakeTensorMode; tied
    ones stay tied); yields the Swap (its ``real`` maps a fake back to the model's tensor), the example
    inputs and the targets made fake likewise (other values as they are). On exit the model holds its own
    tensors again."""
    # Real tensors the forward makes from Python data (a `torch.arange(seq)` lifted as a constant) meet the
    # fake ones: allowed, as in aot_autograd's own mode.
    swap = Swap(_compat.fake_mode(allow_non_fake_inputs=True), meta_device)
    try:
        for mod in model.modules():
            for table in _compat.tensor_tables(mod):
                for k, v in list(table.items()):
                    if v is not None:
                        swap.replace(table, k)
        for mod, k, _ in list(_tensor_attributes(model)):
            swap.replace(vars(mod), k)
        conv = lambda v: swap.fake(v) if isinstance(v, torch.Tensor) else v  # noqa: E731
        yield swap, tuple(conv(v) for v in example_inputs), tuple(conv(v) for v in targets)
    finally:
        swap.restore()
