"""Export a PyTorch training step as a ``memplan.graph``.

The step is traced by aot_autograd (``aot_export_module(..., trace_joint=True)``)
into one functional ATen graph holding the forward, the backward and nothing
else; every node carries its output's fake value (shape, dtype, storage). From
it:

- **Buffers, not values.** A memplan tensor is one storage. Views and aliases
  (``view``, ``t``, ``permute``, ``expand``, ``alias``, ``getitem`` of a
  multi-output op, ``_unsafe_view``) share their base's storage (the fake
  values say so) and are not tensors of their own; a copy that a reshape forces
  (``clone`` then ``_unsafe_view``) is. Every op that creates a storage is a
  memplan op producing it; ops whose outputs are all views are not ops (they
  cost nothing and are recomputed freely by the executor).
- **Phases.** Ops that the loss or the mutated buffers depend on are
  ``forward``; the rest of the joint graph is ``backward``, as in PyTorch's
  partitioners (an op the trace runs before the seed that only the backward
  reads, such as the clone an in-place ReLU6 leaves, is listed just before its
  first reader); the optimizer adds
  one ``update`` op per parameter (SGD reads the weight and its gradient; Adam
  also its two moments, persistent, and a weight-sized temporary).
- **Persistent**: parameters (tied ones once: aot_autograd lifts a shared
  parameter once), buffers, constants the trace lifts (``get_attr`` nodes),
  optimizer state, and the step's inputs (the caller holds them for the whole
  step). Parameters no gradient reaches (unused by the loss, or frozen) have
  no gradient and no update.
- **Mutated inputs.** The functional graph returns batch-norm's new running
  statistics as outputs, copied into the buffers after the step: they are
  graph ``outputs``, and a recomputed batch norm produces them again without
  touching the buffers.
- **Random ops** (ATen tag ``nondeterministic_seeded``: dropout, ``rand``...)
  read a seed tensor of their own (8 bytes, a graph input) and carry
  ``"random": true``: any plan that recomputes one keeps its seed, and the
  executor (``memplan_torch.compile``) replays that seed, so a recomputed mask
  is the mask of the forward.
- **Costs**: ``roofline:DEVICE`` or ``fused:DEVICE`` from each op's FLOPs
  (PyTorch's flop counter on meta tensors) and bytes, as the C++ cost models
  compute them, ``measured``, each node timed on the device the model is on
  (labelled ``measured:cpu`` or ``measured:cuda:<GPU name>``), or
  ``flops``, PyTorch's partitioner's own estimate (unit: flop).

No variants are offered: the backward ops of the joint graph already read what
ATen's derivative formulas read (ReLU's backward reads its output,
``threshold_backward``), and a batch-norm backward from its output would need a
kernel ATen does not have.
"""
from __future__ import annotations

import contextlib
import dataclasses
import math
import operator
from typing import Callable, Sequence

import torch
import torch.fx
from torch.multiprocessing.reductions import StorageWeakRef

from . import costs as _costs
from . import device as _device

OPTIMIZERS = ("sgd", "adam", "adamw")
WORKSPACES = ("measured", "cpu", "cuda", "none")


class ExportError(ValueError):
    """The model or its step cannot be exported (the message names the node or argument)."""


def _tensors_of(val) -> list:
    """The tensors (or None) of a node's value, flattened: a tensor, or a tuple/list of them."""
    if isinstance(val, torch.Tensor):
        return [val]
    if isinstance(val, (tuple, list)):
        out = []
        for v in val:
            out.extend(_tensors_of(v) if isinstance(v, (tuple, list)) else [v if isinstance(v, torch.Tensor) else None])
        return out
    return []


def _key(t: torch.Tensor):
    return StorageWeakRef(t.untyped_storage()).cdata


def _nbytes(t: torch.Tensor) -> int:
    return int(t.untyped_storage().nbytes())


def _view_bytes(t: torch.Tensor) -> int:
    return min(t.numel() * t.element_size(), _nbytes(t))


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


MODEL_LOSS = "model"    # loss_fn: the model computes its own loss (``model(*inputs, labels=target).loss``)


def _loss_of(model, out) -> torch.Tensor:
    loss = out.get("loss") if isinstance(out, dict) else getattr(out, "loss", None)
    if loss is None:
        raise ExportError(f"loss_fn='{MODEL_LOSS}': {type(model).__name__} returned {type(out).__name__} without a "
                          "loss; a Hugging Face model computes one when given labels: pass them as targets=(labels,)")
    return loss


def step_loss(model: torch.nn.Module, loss_fn, inputs: Sequence, targets: Sequence = ()):
    """The training step's loss as eager PyTorch computes it: ``loss_fn(model(*inputs), *targets)``, or with
    ``loss_fn="model"`` the model's own, ``model(*inputs, labels=targets[0]).loss`` (Hugging Face's
    convention; ``model(*inputs).loss`` without targets). ``loss_fn=None`` is ``_default_loss``."""
    if isinstance(loss_fn, str):
        if loss_fn != MODEL_LOSS:
            raise ExportError(f"loss_fn '{loss_fn}': expected a callable, None or '{MODEL_LOSS}' (the model's own loss)")
        if len(targets) > 1:
            raise ExportError(f"loss_fn='{MODEL_LOSS}' passes one target to the model, as labels=; got {len(targets)} "
                              "(wrap the model in a module that takes them)")
        out = model(*inputs, labels=targets[0]) if targets else model(*inputs)
        return _loss_of(model, out)
    return (loss_fn or _default_loss)(model(*inputs), *targets)


_AUTOCAST_DEVICES = ("cpu", "cuda")


def autocast_state() -> tuple:
    """The autocast in effect: ((device type, dtype), ...) for each device type it is enabled on."""
    return tuple((d, torch.get_autocast_dtype(d)) for d in _AUTOCAST_DEVICES if torch.is_autocast_enabled(d))


@contextlib.contextmanager
def autocast_as(state: tuple = ()):
    """Autocast exactly as `state` says (`()`: off on every device), whatever is in effect around it."""
    want = dict(state)
    with contextlib.ExitStack() as stack:
        for d in _AUTOCAST_DEVICES:
            if d in want:
                stack.enter_context(torch.autocast(d, dtype=want[d]))
            elif torch.is_autocast_enabled(d):
                stack.enter_context(torch.autocast(d, enabled=False))
        yield


class _Step(torch.nn.Module):
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


def _params_reaching_loss(step: _Step, args: tuple) -> set:
    """Names (in `step`, tied parameters under each of their names) of the parameters the loss's gradient
    reaches: one forward of the step on fake tensors (no data, no kernels), each name its own leaf as in
    aot_autograd's trace, then a walk of the autograd graph from the loss to its leaves."""
    from torch._subclasses.fake_tensor import FakeTensorMode
    from torch.func import functional_call

    named = dict(step.named_parameters(remove_duplicate=False))
    if not any(p.requires_grad for p in named.values()):
        return set()
    mode = FakeTensorMode(allow_non_fake_inputs=True)  # constants the forward makes stay real tensors
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
def _tracing():
    """While the step is traced, ``torch.compiler.is_compiling()`` is true, as under torch.compile, so that
    libraries take their trace-friendly paths instead of reading tensor values in Python (Hugging Face's
    attention masks: a given padding mask is made into the attention mask, where eagerly it is first tested
    for whether it masks anything). The flag is private to PyTorch; torch.export sets it the same way."""
    old = getattr(torch.compiler, "_is_compiling_flag", None)
    if old is None:
        yield
        return
    torch.compiler._is_compiling_flag = True
    try:
        yield
    finally:
        torch.compiler._is_compiling_flag = old


@contextlib.contextmanager
def _without_gradients(step: _Step, reached: set):
    """The step as aot_autograd must see it: every parameter name that requires a gradient receives one.
    A parameter no gradient reaches is traced with requires_grad=False; a name of a tied parameter that the
    step does not read (BERT's ``cls.predictions.bias``, the decoder's bias under another name) is traced
    as a buffer on the same storage. Both are given back as they were afterwards."""
    named = dict(step.named_parameters(remove_duplicate=False))
    trained = {id(p) for n, p in named.items() if n in reached}
    unused, moved = [], []
    try:
        for n, p in named.items():
            if n in reached or not p.requires_grad:
                continue
            if id(p) not in trained:
                if p.requires_grad:
                    p.requires_grad_(False)
                    unused.append(p)
                continue
            owner, _, leaf = n.rpartition(".")
            mod = step.get_submodule(owner)
            moved.append((mod, dict(mod._parameters)))
            del mod._parameters[leaf]
            mod.register_buffer(leaf, p.detach(), persistent=False)
        yield
    finally:
        for p in unused:
            p.requires_grad_(True)
        for mod, params in reversed(moved):
            for leaf in params:
                if leaf not in mod._parameters:
                    mod._buffers.pop(leaf, None)
                    mod._non_persistent_buffers_set.discard(leaf)
            mod._parameters.clear()
            mod._parameters.update(params)  # in their order: the model's parameters() are as they were


# Advice for what a trace cannot take, by the kind of failure.
_DATA_DEPENDENT = ("the step reads a tensor's value in Python (a branch on a tensor, .item(), .tolist()), so "
                   "its ops would depend on the data; memplan plans one fixed graph: compute the branch with "
                   "tensor ops (torch.where) or take it out of the training step")
_DYNAMIC_SHAPE = ("its output's size depends on the data, so memplan cannot size the tensor: use a form of fixed "
                  "size (a mask and torch.where instead of nonzero / masked_select / boolean indexing)")
_NO_FAKE = ("it has no meta (fake tensor) implementation, so its output cannot be sized without running it: "
            "register one (torch.library.register_fake) or take the op out of the training step")


def _trace_error(e: BaseException, model: torch.nn.Module) -> ExportError:
    """One message for a step the tracer cannot take: the module and the source line it failed in, the op,
    and what to do."""
    import os
    from torch._subclasses import fake_tensor as ft
    from torch.fx.experimental import symbolic_shapes as ss

    modules = {id(m): (name or "(the model)", type(m).__name__) for name, m in model.named_modules()}
    torch_dir = os.path.dirname(torch.__file__)
    here = os.path.dirname(__file__)
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
    cause = next((x for x in reversed(chain) if isinstance(
        x, (ft.DataDependentOutputException, ft.DynamicOutputShapeException, ft.UnsupportedOperatorException,
            ss.GuardOnDataDependentSymNode))), None)
    if isinstance(cause, ft.DynamicOutputShapeException):
        what = f"op {cause.func}: {_DYNAMIC_SHAPE}"
    elif isinstance(cause, ft.UnsupportedOperatorException):
        what = f"op {cause.func}: {_NO_FAKE}"
    elif isinstance(cause, ft.DataDependentOutputException):
        what = f"op {cause.func}: {_DATA_DEPENDENT}"
    elif isinstance(cause, ss.GuardOnDataDependentSymNode):
        what = f"op aten._local_scalar_dense (a tensor's value read in Python): {_DATA_DEPENDENT}"
    else:
        first = (str(e).strip().splitlines() or [""])[0][:300]
        what = f"{type(e).__name__}: {first}"
    where = ""
    if module is not None:
        where = f" in module '{module[0]}' ({module[1]}{', ' + line if line else ''})"
    elif line:
        where = f" at {line}"
    return ExportError(f"cannot trace the training step of {type(model).__name__}{where}: {what}")


def trace(model: torch.nn.Module, example_inputs: Sequence, loss_fn, targets: Sequence = ()) -> Joint:
    """Trace one training step (forward, loss, backward) of `model` into aot_autograd's joint graph.

    Parameters no gradient reaches (unused by the loss, or requires_grad=False) are traced without one: they
    are read, have no gradient and no update. The step runs under the autocast in effect (its casts become
    nodes). A step the tracer cannot take raises one ExportError naming the module, the op and the remedy."""
    from torch._functorch.aot_autograd import aot_export_module

    example_inputs = tuple(example_inputs)
    targets = tuple(targets)
    autocast = autocast_state()
    step = _Step(model, loss_fn, len(example_inputs), autocast)
    named_p = dict(step.named_parameters(remove_duplicate=False))
    named_b = dict(step.named_buffers(remove_duplicate=False))
    was_training = model.training
    model.train()
    try:
        with _tracing():
            reached = _params_reaching_loss(step, example_inputs + targets)
        if not reached:
            raise ExportError(f"no parameter of {type(model).__name__} receives a gradient from the loss (all are "
                              "frozen, requires_grad=False, or unused): there is no training step to plan")
        trained = {id(p) for n, p in named_p.items() if n in reached}
        no_grad = {n: ("frozen" if not p.requires_grad else "unused") for n, p in named_p.items()
                   if id(p) not in trained}
        with _without_gradients(step, reached), _tracing():
            # What aot_autograd lifts: a tied name the step does not read is a buffer while it traces.
            traced_p = dict(step.named_parameters(remove_duplicate=False))
            traced_b = dict(step.named_buffers(remove_duplicate=False))
            gm, sig = aot_export_module(step, example_inputs + targets, trace_joint=True, output_loss_index=0)
    except ExportError:
        raise
    except Exception as e:  # aot_autograd and fake tensors report what they cannot take from deep inside
        raise _trace_error(e, model) from None
    finally:
        model.train(was_training)
    # aot_export_module's fake values do not share storages between a view and its base; propagate
    # fresh fake values through the graph so that they do (what a run on real tensors would do).
    from torch._subclasses.fake_tensor import FakeTensorMode
    from torch.fx.passes.fake_tensor_prop import FakeTensorProp
    mode = FakeTensorMode(allow_non_fake_inputs=False)
    real = []
    it = iter(example_inputs + targets)
    for n in gm.graph.nodes:
        if n.op != "placeholder":
            continue
        if n.name in sig.inputs_to_parameters:
            real.append(traced_p[sig.inputs_to_parameters[n.name]])
        elif n.name in sig.inputs_to_buffers:
            real.append(traced_b[sig.inputs_to_buffers[n.name]])
        else:
            real.append(next(it))
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
    seed = None
    for n in gm.graph.nodes:
        if n.op == "call_function" and n.target is torch.ops.aten.ones_like.default and n.args and \
                getattr(n.args[0], "name", None) == loss:
            seed = n.name
            break
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
    from .fake import faked
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


# --------------------------------------------------------------------------------------------
# From the joint graph to buffers and ops


@dataclasses.dataclass
class Mapping:
    """How the memplan graph's names map onto the joint graph (what the executor needs)."""
    tensor_of: dict          # fx node name -> list of memplan tensor names it holds (storages)
    members: dict            # memplan tensor name -> fx node names whose value lives in it
    op_node: dict            # memplan op name -> fx node name (forward/backward ops)
    op_phase: dict           # memplan op name -> phase
    random_ops: list         # memplan op names of random ops
    seed_tensor: dict        # memplan op name (random) -> seed tensor name
    update_ops: dict         # memplan op name -> parameter FQN (update phase)


def _is_random(n: torch.fx.Node) -> bool:
    """Whether the op draws from a generator: tagged so, unless its only randomness is a dropout probability
    of 0 (scaled_dot_product_attention's forms are tagged for their dropout_p)."""
    if torch.Tag.nondeterministic_seeded not in getattr(n.target, "tags", ()):
        return False
    schema = getattr(n.target, "_schema", None)
    names = [a.name for a in schema.arguments] if schema is not None else []
    if "dropout_p" not in names:
        return True
    i = names.index("dropout_p")
    p = n.args[i] if i < len(n.args) else n.kwargs.get("dropout_p", schema.arguments[i].default_value)
    return not isinstance(p, (int, float)) or p != 0


def _is_inplace(n: torch.fx.Node) -> bool:
    schema = getattr(n.target, "_schema", None)
    if schema is None:
        return False
    return any(a.alias_info is not None and a.alias_info.is_write for a in schema.arguments)


def _kind_and_flops(n: torch.fx.Node, out_tensors: list) -> tuple[str, float]:
    """The op's compute kind and FLOPs: PyTorch's flop counter on meta copies of its inputs;
    ops it does not count (point-wise, reductions, copies) do one flop per output element."""
    from torch.utils.flop_counter import FlopCounterMode

    def meta(v):
        if isinstance(v, torch.fx.Node):
            v = v.meta.get("val")
        if isinstance(v, torch.Tensor):
            return torch.empty_strided(v.shape, v.stride(), dtype=v.dtype, device="meta")
        if isinstance(v, (list, tuple)):
            return type(v)(meta(x) for x in v)
        return v

    flops = 0
    packet = getattr(n.target, "overloadpacket", None)
    from torch.utils.flop_counter import flop_registry
    if packet in flop_registry:
        try:
            counter = FlopCounterMode(display=False)
            with counter:
                n.target(*meta(list(n.args)), **{k: meta(v) for k, v in n.kwargs.items()})
            flops = counter.get_total_flops()
        except Exception:
            flops = 0
    if flops > 0:
        return _costs.MATMUL, float(flops)
    elems = float(sum(t.numel() for t in out_tensors if t is not None))
    pointwise = torch.Tag.pointwise in getattr(n.target, "tags", ())
    return (_costs.POINTWISE if pointwise else _costs.OTHER), elems


def node_work(n: torch.fx.Node, out_tensors: list | None = None) -> _costs.OpWork:
    """What ATen node `n` does, for the cost models: its kind and FLOPs, the bytes it reads (its inputs'
    views) and writes (`out_tensors`, by default every tensor it returns), and the bytes of inputs another
    node produced (what a fused point-wise op takes from its producer)."""
    if out_tensors is None:
        out_tensors = [t for t in _tensors_of(n.meta.get("val")) if t is not None]
    kind, flops = _kind_and_flops(n, out_tensors)
    in_vals = [v for a in n.all_input_nodes for v in _tensors_of(a.meta.get("val")) if v is not None]
    producer = float(sum(_view_bytes(v) for a in n.all_input_nodes if a.op != "placeholder"
                         for v in _tensors_of(a.meta.get("val")) if v is not None))
    return _costs.OpWork(kind=kind, flops=flops, bytes_read=float(sum(_view_bytes(v) for v in in_vals)),
                         bytes_written=float(sum(_view_bytes(t) for t in out_tensors)), producer_bytes=producer,
                         precision=_costs.precision_of(v.dtype for v in in_vals))


def forward_roots(joint: Joint) -> list:
    """Names of the nodes whose ancestors are the forward: ``joint.forward_roots``, else the loss and the
    mutated buffers."""
    return joint.forward_roots if joint.forward_roots is not None else [joint.loss, *joint.mutations]


def forward_nodes(joint: Joint) -> set:
    """Names of the forward's nodes: what the forward roots depend on."""
    by_name = {n.name: n for n in joint.gm.graph.nodes}
    forward, stack = set(), [by_name[k] for k in forward_roots(joint)]
    while stack:
        n = stack.pop()
        if n.name in forward:
            continue
        forward.add(n.name)
        stack.extend(n.all_input_nodes)
    return forward


def build_graph(joint: Joint, optimizer: str = "sgd", cost: str = "roofline:v100", name: str = "model",
                measured: dict | None = None, workspaces: dict | None = None) -> tuple[dict, Mapping]:
    """The memplan.graph (a dict ready for JSON) of `joint`, and how its names map onto the joint graph.
    `measured`: node name -> microseconds, required when `cost` is measured ('measured[:cpu|:cuda]')."""
    if optimizer is not None and optimizer not in OPTIMIZERS:
        raise ExportError(f"unknown optimizer '{optimizer}' (known: {', '.join(OPTIMIZERS)})")
    cost_kind, _device = _costs.parse(cost)
    if cost_kind == "measured" and measured is None:
        raise ExportError(f"cost '{cost}' needs measured node times (memplan_torch.costs.measure_node_times)")
    graph = joint.gm.graph
    nodes = list(graph.nodes)
    by_name = {n.name: n for n in nodes}

    roots = forward_roots(joint)
    forward = forward_nodes(joint)
    # What the trace runs before the backward's seed but neither the loss nor a mutation needs (copies
    # that only the backward reads) is backward work, as in PyTorch's own partitioners: for an in-place
    # op whose derivative reads its input (torchvision's ReLU6(inplace=True), a hardtanh_),
    # functionalization clones the input in the forward and hands the clone to the backward. Such an op
    # is listed just before its first reader (below), so the clone is made where the backward needs it
    # and its input is the forward tensor a plan keeps or makes again. As a forward op, MobileNet-V2's
    # 35 clones (184 MiB at batch 8) were saved activations whose every remaking counted as
    # recomputation, though PyTorch runs them once in the backward whatever the budget.
    deferred = set()
    if joint.tangents:  # the backward starts at the first node that reads what a tangent makes
        after_seed = set(joint.tangents)
        for n in nodes:
            if any(a.name in after_seed for a in n.all_input_nodes):
                after_seed.add(n.name)
        seed = next((n.name for n in nodes if n.op == "call_function" and n.name in after_seed), None)
    else:
        seed = joint.seed
    if seed is not None:
        for n in nodes:
            if n.name == seed:
                break
            if n.op == "call_function" and n.name not in forward:
                deferred.add(n.name)

    tensors: list[dict] = []
    tensor_index: dict[str, int] = {}
    storage_name: dict = {}           # storage key -> memplan tensor name
    tensor_of: dict[str, list] = {}
    members: dict[str, list] = {}
    ops: list[dict] = []
    op_node, op_phase = {}, {}
    random_ops, seed_tensor, update_ops = [], {}, {}
    produced_by_op: set = set()       # memplan tensors some op produces
    used_names: set = set()

    def unique(base: str) -> str:
        name, k = base, 1
        while name in used_names:
            k += 1
            name = f"{base}#{k}"
        used_names.add(name)
        return name

    def add_tensor(name: str, nbytes: int, persistent: bool = False) -> str:
        name = unique(name)
        entry = {"name": name, "bytes": int(nbytes)}
        if persistent:
            entry["persistent"] = True
        tensor_index[name] = len(tensors)
        tensors.append(entry)
        members[name] = []
        return name

    def getitem_users(n):
        users = {}
        for u in n.users:
            if u.op == "call_function" and u.target is operator.getitem and isinstance(u.args[1], int):
                users[u.args[1]] = u
        return users

    n_params = 0
    for n in nodes:
        if n.op == "output":
            continue
        vals = _tensors_of(n.meta.get("val"))
        if n.op == "placeholder":
            t = vals[0] if vals else None
            if t is None:
                raise ExportError(f"placeholder '{n.name}' has no tensor value")
            if n.name in joint.tangents:  # made by its tangent op, below
                tensor_of[n.name] = [add_tensor(n.name, _nbytes(t))]
                members[tensor_of[n.name][0]].append(n.name)
                continue
            if n.name in joint.params:
                label, persistent = joint.params[n.name], True
                n_params += t.numel()
            elif n.name in joint.buffers:
                label, persistent = joint.buffers[n.name], True
            else:
                label, persistent = f"input{joint.inputs.index(n.name)}" if n.name in joint.inputs else n.name, True
            k = _key(t)
            if k in storage_name:  # two placeholders on one storage (a tied weight): one buffer
                tname = storage_name[k]
                if n.name in joint.params:
                    n_params -= t.numel()
            else:
                tname = add_tensor(label, _nbytes(t), persistent)
                storage_name[k] = tname
            tensor_of[n.name] = [tname]
            members[tname].append(n.name)
            continue
        if n.op == "get_attr":
            # A constant the trace lifted (a tensor the forward makes from Python data, a plain tensor
            # attribute): persistent and read-only, one tensor per storage as a placeholder.
            t = vals[0] if vals else None
            if t is None:
                raise ExportError(f"node '{n.name}' reads '{n.target}', which has no tensor value")
            k = _key(t)
            if k not in storage_name:
                storage_name[k] = add_tensor(str(n.target), _nbytes(t), True)
            tensor_of[n.name] = [storage_name[k]]
            members[storage_name[k]].append(n.name)
            continue
        if n.op != "call_function":
            raise ExportError(f"node '{n.name}': unsupported FX node kind '{n.op}' in the joint graph")
        new = [(i, t) for i, t in enumerate(vals) if t is not None and _key(t) not in storage_name]
        held = []
        is_op = bool(new) or _is_inplace(n) or _is_random(n)
        if not is_op:
            # A view, an alias or a getitem: its value lives in storages that exist already.
            for t in vals:
                if t is not None:
                    held.append(storage_name[_key(t)])
            tensor_of[n.name] = sorted(set(held), key=held.index)
            for tname in tensor_of[n.name]:
                members[tname].append(n.name)
            continue
        gi = getitem_users(n)
        outs = []
        multi = isinstance(n.meta.get("val"), (tuple, list))
        for i, t in new:
            base = gi[i].name if multi and i in gi else (f"{n.name}.{i}" if multi else n.name)
            tname = add_tensor(base, _nbytes(t))
            storage_name[_key(t)] = tname
            outs.append(tname)
            produced_by_op.add(tname)
        for t in vals:
            if t is not None:
                held.append(storage_name[_key(t)])
        tensor_of[n.name] = sorted(set(held), key=held.index)
        if not multi:
            for tname in tensor_of[n.name]:
                members[tname].append(n.name)
        ins = []
        for a in n.all_input_nodes:
            for tname in tensor_of.get(a.name, []):
                if tname not in ins and tname not in outs:
                    ins.append(tname)
        opname = unique(n.name) if n.name in used_names else n.name
        used_names.add(opname)
        phase = "forward" if n.name in forward else "backward"
        op = {"name": opname, "inputs": ins, "outputs": outs, "phase": phase,
              "aten": str(n.target)}
        if _is_random(n):
            seed = add_tensor(f"{n.name}.seed", 8)
            op["inputs"] = ins + [seed]
            op["random"] = True
            random_ops.append(opname)
            seed_tensor[opname] = seed
        out_ts = [t for _, t in new]
        work = node_work(n, out_ts)
        kind, flops = work.kind, work.flops
        if cost_kind == "measured":
            op["cost"] = float(measured.get(n.name, 0.0))
        else:
            op["cost"] = _costs.model_us(cost, work)
        op["flops"] = flops if kind == _costs.MATMUL else 0.0
        if workspaces and workspaces.get(n.name, 0) > 0:
            op["workspace"] = int(workspaces[n.name])
        ops.append(op)
        op_node[opname] = n.name
        op_phase[opname] = phase

    # Deferred ops just before their first reader (the last listed first, so that a chain of them
    # keeps its order); one nothing reads stays where it was.
    for i in reversed(range(len(ops))):
        if op_node.get(ops[i]["name"]) not in deferred:
            continue
        outs_i = set(ops[i]["outputs"])
        first = next((j for j in range(i + 1, len(ops)) if outs_i & set(ops[j]["inputs"])), None)
        if first is not None:
            ops.insert(first - 1, ops.pop(i))

    # Tangents: each made just before the first backward op, after the forward's outputs it reads.
    if joint.tangents:
        first = next((i for i, op in enumerate(ops) if op["phase"] != "forward"
                      and op_node.get(op["name"]) not in forward and op_node.get(op["name"]) not in deferred), len(ops))
        fwd_outs = list(dict.fromkeys(t for k in roots for t in tensor_of[k]))
        for k, tangent in enumerate(joint.tangents):
            opname = unique(f"tangent.{tangent}")
            ops.insert(first + k, {"name": opname, "inputs": fwd_outs, "outputs": tensor_of[tangent],
                                   "phase": "backward", "cost": 0.0, "aten": "tangent"})
            op_node[opname] = tangent
            op_phase[opname] = "backward"
            produced_by_op.update(tensor_of[tangent])

    # The optimizer: one update op per parameter with a gradient.
    # A tied weight lifted under several names has one gradient per name (autograd sums them): one
    # update reads them all.
    param_tensor = {fqn: tensor_of[ph][0] for ph, fqn in joint.params.items()}
    grads_of: dict = {}
    for node, fqn in joint.grads.items():
        tname = param_tensor.get(fqn) or param_tensor.get(joint.params.get(fqn, ""), None)
        if tname is None:
            continue
        grads_of.setdefault(tname, []).extend(tensor_of[node])
    fqn_of = {}
    for ph, fqn in joint.params.items():
        fqn_of.setdefault(param_tensor[fqn], fqn)
    for ptensor, fqn in fqn_of.items():
        if ptensor not in grads_of or optimizer is None:
            continue
        p = tensors[tensor_index[ptensor]]
        ins = [ptensor] + [g for g in dict.fromkeys(grads_of[ptensor]) if g != ptensor]
        nb = p["bytes"]
        workspace = 0
        moved = 3.0 * nb
        adam = optimizer in ("adam", "adamw")  # AdamW: Adam's two moments and temporary, decay in place
        if adam:
            m = add_tensor(f"{fqn}.exp_avg", nb, True)
            v = add_tensor(f"{fqn}.exp_avg_sq", nb, True)
            ins += [m, v]
            workspace = nb
            moved = 7.0 * nb
        work = _costs.OpWork(kind=_costs.POINTWISE, flops=joint.param_tensors[fqn].numel() * (10 if adam else 2),
                             bytes_read=moved * 2 / 3, bytes_written=moved / 3)
        opname = unique(f"update.{fqn}")
        if cost_kind == "measured":
            us = _costs.measure_update_us(joint.param_tensors[fqn], "adam" if adam else optimizer)
        else:
            us = _costs.model_us(cost, work)
        op = {"name": opname, "inputs": ins, "outputs": [], "phase": "update", "cost": us}
        if workspace:
            op["workspace"] = int(workspace)
        ops.append(op)
        update_ops[opname] = fqn
        op_phase[opname] = "update"

    outs = []
    # Gradients are outputs too: autograd hands them to `.grad`, and the optimizer reads them after the
    # backward (``loss.backward(); opt.step()``), so no plan may free one at an early update op.
    returned = joint.outputs if joint.outputs is not None else [joint.loss, *joint.mutations, *joint.grads]
    for a in returned:
        for tname in tensor_of[a]:
            if tname not in outs:
                outs.append(tname)
    if not joint.recompute_random:
        for op in ops:
            if op.get("random") and op["phase"] == "forward":
                outs += [t for t in op["outputs"] if t not in outs]

    for op in ops:
        op["cost"] = float(op["cost"]) if math.isfinite(op["cost"]) else 0.0
    g = {
        "format": "memplan.graph",
        "version": 1,
        "name": name,
        "cost_unit": _costs.unit(cost),
        "cost_model": cost,
        "tensors": tensors,
        "ops": ops,
        "outputs": outs,
        "memplan_torch": {
            "torch": torch.__version__,
            "parameters": int(n_params),
            "optimizer": optimizer,
            "loss": tensor_of[joint.loss][0],
        },
    }
    return g, Mapping(tensor_of=tensor_of, members=members, op_node=op_node, op_phase=op_phase,
                      random_ops=random_ops, seed_tensor=seed_tensor, update_ops=update_ops)


def _default_loss(out, *targets):
    if not isinstance(out, torch.Tensor):  # a Hugging Face output (its logits), or a tuple (its first)
        logits = out.get("logits") if isinstance(out, dict) else getattr(out, "logits", None)
        out = logits if logits is not None else out[0] if isinstance(out, (tuple, list)) and out else out
    if targets:
        t = targets[0]
        if out.dim() > 2:
            return torch.nn.functional.cross_entropy(out.reshape(-1, out.shape[-1]), t.reshape(-1))
        return torch.nn.functional.cross_entropy(out, t)
    return out.float().sum()


def export(model: torch.nn.Module, example_inputs: Sequence, loss_fn: Callable | None = None,
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
    ``"cpu"`` or ``"cuda"``: the same, insisting on that device); "none": no workspaces. The graph records where costs
    and workspaces were measured (``cost_model`` "measured:cuda:NVIDIA H200", ``memplan_torch.workspace``)."""
    return export_with_mapping(model, example_inputs, loss_fn, optimizer, targets, cost, name, workspace,
                               progress)[0]


def export_with_mapping(model, example_inputs, loss_fn=None, optimizer="sgd", targets=(), cost="roofline:v100",
                        name=None, workspace="measured", progress=None):
    """`export`, and also the traced joint graph and the name mapping (what `compile` runs)."""
    from . import meta as _meta
    if _meta.is_meta(model, tuple(example_inputs) + tuple(targets)):  # no data: fake tensors, modelled costs
        return _meta.export_with_mapping(model, example_inputs, loss_fn, optimizer, targets, cost, name, workspace,
                                         progress)
    loss_fn = loss_fn or _default_loss
    _costs.parse(cost)
    if optimizer not in OPTIMIZERS:
        raise ExportError(f"unknown optimizer '{optimizer}' (known: {', '.join(OPTIMIZERS)})")
    if progress:
        progress("tracing the training step (aot_autograd)")
    if workspace not in WORKSPACES:
        raise ExportError(f"workspace '{workspace}': expected {', '.join(WORKSPACES)}")
    try:
        dev = _device.of(list(model.parameters()) + list(model.buffers()) + list(example_inputs) + list(targets))
    except ValueError as e:
        raise ExportError(str(e)) from None
    # Tracing draws from the CPU's generator: the caller's random streams are left as they were.
    with _device.preserved_rng([dev]):
        joint = trace_fake(model, example_inputs, loss_fn, targets)
    measured = workspaces = None
    args = placeholder_values(joint, tuple(example_inputs) + tuple(targets))
    cost_label = cost
    if _costs.parse(cost)[0] == "measured":
        try:
            cost_label = _costs.measured_on(cost, dev)
        except ValueError as e:
            raise ExportError(str(e)) from None
        with autocast_as(()):  # the graph holds the casts of the autocast it was traced under
            measured = _costs.measure_node_times(joint.gm, args, progress=progress)
    ws_label = "none"
    if workspace != "none":
        if workspace in ("cpu", "cuda") and dev.type != workspace:
            raise ExportError(f"workspace '{workspace}': the model's tensors are on {dev}; workspaces are measured "
                              f"where they are (use 'measured' or '{dev.type}', or move the model)")
        from .measure import node_workspaces
        if progress:
            progress(f"measuring workspaces on {dev}" + (" (a warm-up run, then a measured one)" if dev.type == "cuda"
                                                           else " (one run)"))
        with autocast_as(()):
            workspaces = node_workspaces(joint.gm, args)
        ws_label = "measured:" + _device.label(dev)
    name = name or f"{type(model).__name__.lower()}-train"
    g, mapping = build_graph(joint, optimizer, cost, name, measured, workspaces)
    g["cost_model"] = cost_label
    g["memplan_torch"]["workspace"] = ws_label
    g["memplan_torch"]["device"] = _device.label(dev)
    return g, joint, mapping


def placeholder_values(joint: Joint, step_inputs: Sequence) -> list:
    """The joint graph's arguments: parameters, buffers, then the step's inputs, in placeholder order."""
    args = []
    it = iter(step_inputs)
    for n in joint.gm.graph.nodes:
        if n.op != "placeholder":
            continue
        if n.name in joint.params:
            args.append(joint.param_tensors[joint.params[n.name]].detach())
        elif n.name in joint.buffers:
            args.append(joint.buffer_tensors[joint.buffers[n.name]].detach())
        else:
            args.append(next(it))
    return args
