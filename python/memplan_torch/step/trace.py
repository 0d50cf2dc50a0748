"""Tracing a training step into aot_autograd's joint graph (``Joint``).

aot_autograd (``aot_export_module(..., trace_joint=True)``) records one step, forward, loss and backward, as
one functional ATen graph; every node carries its output's fake value (shape, dtype, storage). The trace
runs on fake stand-ins of the model's tensors (``step.fake``), so no kernel runs and nothing is allocated;
a step whose shapes depend on its data is traced on its real tensors instead.

Parameters no gradient reaches (unused by the loss, or frozen) are traced without one. A step the tracer
cannot take raises one ``ExportError`` naming the module, the source line, the op and the remedy.
"""
from __future__ import annotations

import contextlib
import os
from typing import Sequence

import torch
import torch.fx
from torch.fx.passes.fake_tensor_prop import FakeTensorProp

from .. import _compat
from .fake import faked
from .joint import ExportError, Joint, autocast_as, autocast_state, step_loss


class StepModule(torch.nn.Module):
    """The training step as one module: ``forward(*inputs, *targets)`` returns ``(loss,)``."""

    def __init__(self, model, loss_fn, n_inputs, autocast=()):
        super().__init__()
        self.model = model
        self.loss_fn = loss_fn
        self.n_inputs = n_inputs
        self.autocast = autocast

    def forward(self, *args):
        with autocast_as(self.autocast):
            loss = step_loss(self.model, self.loss_fn, args[: self.n_inputs], args[self.n_inputs:])
        if not isinstance(loss, torch.Tensor) or loss.numel() != 1:
            raise ExportError("loss_fn must return a tensor with one element (the loss)")
        return (loss.reshape(()),)


def _strip(fqn: str) -> str:
    return fqn[len("model."):] if fqn.startswith("model.") else fqn


def _params_reaching_loss(step: StepModule, args: tuple) -> set:
    """Names (in `step`, tied parameters under each of their names) of the parameters the loss's gradient
    reaches: one forward of the step on fake tensors (no data, no kernels), each name its own leaf as in
    aot_autograd's trace, then a walk of the autograd graph from the loss to its leaves."""
    from torch.func import functional_call

    named = dict(step.named_parameters(remove_duplicate=False))
    if not any(p.requires_grad for p in named.values()):
        return set()
    mode = _compat.fake_mode(allow_non_fake_inputs=True)  # constants the forward makes stay real tensors
    fake = {n: mode.from_tensor(t.detach()).requires_grad_(t.requires_grad) for n, t in named.items()}
    fake.update({n: mode.from_tensor(t) for n, t in step.named_buffers(remove_duplicate=False)})
    with mode:
        (loss,) = functional_call(step, fake, tuple(mode.from_tensor(a) if isinstance(a, torch.Tensor) else a
                                                     for a in args), tie_weights=False)
    reached, seen, stack = set(), set(), [loss.grad_fn]
    while stack:
        fn = stack.pop()
        if fn is None or fn in seen:
            continue
        seen.add(fn)
        var = getattr(fn, "variable", None)  # AccumulateGrad: a leaf
        if var is not None:
            reached.add(id(var))
        stack.extend(f for f, _ in fn.next_functions)
    return {n for n, t in fake.items() if n in named and id(t) in reached}


@contextlib.contextmanager
def _without_gradients(step: StepModule, reached: set):
    """The step as aot_autograd must see it: every parameter name that requires a gradient receives one.
    A parameter no gradient reaches is traced with requires_grad=False; a name of a tied parameter that the
    step does not read (BERT's ``cls.predictions.bias``, the decoder's bias under another name) is traced
    as a buffer on the same storage. Both are given back as they were afterwards."""
    named = dict(step.named_parameters(remove_duplicate=False))
    trained = {id(p) for n, p in named.items() if n in reached}
    unused, moved = [], []
    for n, p in named.items():
        if n in reached or not p.requires_grad:
            continue
        if id(p) not in trained:
            unused.append(p)
            continue
        owner, _, leaf = n.rpartition(".")
        moved.append((step.get_submodule(owner), leaf))
    try:
        for p in unused:
            p.requires_grad_(False)
        with _compat.parameters_as_buffers(moved):
            yield
    finally:
        for p in unused:
            p.requires_grad_(True)


# Advice for what a trace cannot take, by the kind of failure.
_DATA_DEPENDENT = ("the step reads a tensor's value in Python (a branch on a tensor, .item(), .tolist()), so "
                   "its ops would depend on the data; memplan plans one fixed graph: compute the branch with "
                   "tensor ops (torch.where) or take it out of the training step")
_ADVICE = {
    _compat.DYNAMIC_OUTPUT_SHAPE: "its output's size depends on the data, so memplan cannot size the tensor: use a "
                                  "form of fixed size (a mask and torch.where instead of nonzero / masked_select / "
                                  "boolean indexing)",
    _compat.NO_FAKE_IMPLEMENTATION: "it has no meta (fake tensor) implementation, so its output cannot be sized "
                                    "without running it: register one (torch.library.register_fake) or take the op "
                                    "out of the training step",
    _compat.DATA_DEPENDENT_OUTPUT: _DATA_DEPENDENT,
    _compat.GUARD_ON_DATA: _DATA_DEPENDENT,
}


def _trace_error(e: BaseException, model: torch.nn.Module) -> ExportError:
    """One message for a step the tracer cannot take: the module and the source line it failed in, the op,
    and what to do."""
    modules = {id(m): (name or "(the model)", type(m).__name__) for name, m in model.named_modules()}
    torch_dir = os.path.dirname(torch.__file__)
    here = os.path.dirname(os.path.dirname(__file__))  # the package's own frames are not the user's line
    module = line = None
    chain, x = [], e
    while x is not None and x not in chain:
        chain.append(x)
        x = x.__cause__ or x.__context__
    for x in reversed(chain):  # the innermost exception last
        tb = x.__traceback__
        while tb is not None:
            f = tb.tb_frame
            m = f.f_locals.get("self")
            if id(m) in modules and isinstance(m, torch.nn.Module):
                module = modules[id(m)]
            path = f.f_code.co_filename
            if not path.startswith((torch_dir, here, "<")) and "/contextlib.py" not in path:
                line = f"{os.path.basename(path)}:{tb.tb_lineno}"
            tb = tb.tb_next
    failure = next((f for f in (_compat.trace_failure(x) for x in reversed(chain)) if f is not None), None)
    if failure is None:
        first = (str(e).strip().splitlines() or [""])[0][:300]
        what = f"{type(e).__name__}: {first}"
    else:
        kind, func = failure
        op = func if func is not None else "aten._local_scalar_dense (a tensor's value read in Python)"
        what = f"op {op}: {_ADVICE[kind]}"
    where = ""
    if module is not None:
        where = f" in module '{module[0]}' ({module[1]}{', ' + line if line else ''})"
    elif line:
        where = f" at {line}"
    return ExportError(f"cannot trace the training step of {type(model).__name__}{where}: {what}")


def _placeholder_tensors(gm, sig, traced_p: dict, traced_b: dict, step_args: tuple) -> list:
    """The tensors the joint graph's placeholders stand for, in their order."""
    real = []
    it = iter(step_args)
    for n in gm.graph.nodes:
        if n.op != "placeholder":
            continue
        if n.name in sig.inputs_to_parameters:
            real.append(traced_p[sig.inputs_to_parameters[n.name]])
        elif n.name in sig.inputs_to_buffers:
            real.append(traced_b[sig.inputs_to_buffers[n.name]])
        else:
            real.append(next(it))
    return real


def trace(model: torch.nn.Module, example_inputs: Sequence, loss_fn, targets: Sequence = ()) -> Joint:
    """Trace one training step (forward, loss, backward) of `model` into aot_autograd's joint graph.

    Parameters no gradient reaches (unused by the loss, or requires_grad=False) are traced without one: they
    are read, have no gradient and no update. The step runs under the autocast in effect (its casts become
    nodes). A step the tracer cannot take raises one ExportError naming the module, the op and the remedy."""
    example_inputs = tuple(example_inputs)
    targets = tuple(targets)
    autocast = autocast_state()
    step = StepModule(model, loss_fn, len(example_inputs), autocast)
    named_p = dict(step.named_parameters(remove_duplicate=False))
    named_b = dict(step.named_buffers(remove_duplicate=False))
    was_training = model.training
    model.train()
    try:
        with _compat.compiling():
            reached = _params_reaching_loss(step, example_inputs + targets)
        if not reached:
            raise ExportError(f"no parameter of {type(model).__name__} receives a gradient from the loss (all are "
                              "frozen, requires_grad=False, or unused): there is no training step to plan")
        trained = {id(p) for n, p in named_p.items() if n in reached}
        no_grad = {n: ("frozen" if not p.requires_grad else "unused") for n, p in named_p.items()
                   if id(p) not in trained}
        with _without_gradients(step, reached), _compat.compiling():
            # What aot_autograd lifts: a tied name the step does not read is a buffer while it traces.
            traced_p = dict(step.named_parameters(remove_duplicate=False))
            traced_b = dict(step.named_buffers(remove_duplicate=False))
            gm, sig = _compat.export_joint(step, example_inputs + targets)
    except ExportError:
        raise
    except Exception as e:  # aot_autograd and fake tensors report what they cannot take from deep inside
        raise _trace_error(e, model) from None
    finally:
        model.train(was_training)
    # aot_export_module's fake values do not share storages between a view and its base; propagate
    # fresh fake values through the graph so that they do (what a run on real tensors would do).
    mode = _compat.fake_mode(allow_non_fake_inputs=False)
    real = _placeholder_tensors(gm, sig, traced_p, traced_b, example_inputs + targets)
    # A tied parameter's name traced as a buffer reads the parameter itself (the optimizer updates it).
    buffer_tensors = {**named_b, **{n: named_p[n] for n in traced_b if n not in named_b}}
    # The graph holds its casts: its nodes run without autocast (as the interpreter runs them).
    with torch.no_grad(), autocast_as(()):
        FakeTensorProp(gm, mode).propagate(*[mode.from_tensor(t.detach()) for t in real])
    constants = {}
    for n in gm.graph.nodes:
        if n.op != "get_attr":
            continue
        if not isinstance(getattr(gm, n.target, None), torch.Tensor):
            raise ExportError(f"node '{n.name}' reads '{n.target}', which is not a tensor (a higher-order op's "
                              "subgraph?): the exporter takes ATen graphs of tensors only")
        constants[n.name] = n.target
    loss = sig.user_outputs[0]
    seed = next((n.name for n in gm.graph.nodes if n.op == "call_function"
                 and n.target is torch.ops.aten.ones_like.default and n.args
                 and getattr(n.args[0], "name", None) == loss), None)
    return Joint(
        gm=gm,
        params={k: _strip(v) for k, v in sig.inputs_to_parameters.items()},
        buffers={k: _strip(v) for k, v in sig.inputs_to_buffers.items()},
        inputs=list(sig.user_inputs),
        loss=loss,
        seed=seed,
        mutations={k: _strip(v) for k, v in sig.buffers_to_mutate.items()},
        grads={k: _strip(v) for k, v in sig.backward_signature.gradients_to_parameters.items()},
        param_tensors={_strip(k): v for k, v in named_p.items()},
        buffer_tensors={_strip(k): v for k, v in buffer_tensors.items()},
        constants=constants,
        no_grad={_strip(k): v for k, v in no_grad.items()},
        autocast=autocast,
    )


def trace_fake(model: torch.nn.Module, example_inputs: Sequence, loss_fn, targets: Sequence = ()) -> Joint:
    """`trace` on fake stand-ins of the model's tensors and of the example inputs and targets (no kernel runs
    while the graph is recorded), returning a Joint that holds the model's own tensors. A step whose shapes
    depend on its data (an op without a fake implementation, a `.item()` deciding control flow), or that fails
    on fake tensors for another reason, is traced on its real tensors, as `trace` alone does (and fails as
    it does)."""
    try:
        with faked(model, example_inputs, targets) as (swap, inputs, tgts):
            joint = trace(model, inputs, loss_fn, tgts)
    except ExportError:
        return trace(model, example_inputs, loss_fn, targets)
    joint.param_tensors = {k: swap.real(v) for k, v in joint.param_tensors.items()}
    joint.buffer_tensors = {k: swap.real(v) for k, v in joint.buffer_tensors.items()}
    for name in joint.constants.values():  # a plain tensor attribute of the model, read through get_attr
        v = getattr(joint.gm, name)
        if swap.real(v) is not v:
            setattr(joint.gm, name, swap.real(v))
    return joint
