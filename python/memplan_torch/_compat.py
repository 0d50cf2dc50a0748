"""Every private PyTorch name memplan_torch uses, each behind a function named for what it does.

PyTorch's private APIs move between releases; here is the one place a new release can break, and the
rest of the package reads only public names (``tests/layers/check_python.py`` checks that no other file
names a private one). Every name is looked up when its function is called, not when this module is
imported, so importing memplan_torch imports neither Inductor nor aot_autograd.

Tested against the PyTorch the test command installs (``bash cmake/setup.sh test``).
"""
from __future__ import annotations

import contextlib
from typing import Callable, Iterable, Sequence

import torch

# --------------------------------------------------------------------------------------------
# Fake tensors (torch._subclasses.fake_tensor)


def fake_mode(allow_non_fake_inputs: bool = False):
    """A new ``FakeTensorMode``: tensors made under it carry shapes, strides, dtypes and devices, no data.
    `allow_non_fake_inputs`: real tensors may meet fake ones (constants a forward makes from Python data)."""
    from torch._subclasses.fake_tensor import FakeTensorMode
    return FakeTensorMode(allow_non_fake_inputs=allow_non_fake_inputs)


# What a failed trace on fake tensors was, by kind: the op (when there is one) could not be sized without
# its data.
DYNAMIC_OUTPUT_SHAPE, NO_FAKE_IMPLEMENTATION, DATA_DEPENDENT_OUTPUT, GUARD_ON_DATA = (
    "dynamic_output_shape", "no_fake_implementation", "data_dependent_output", "guard_on_data")


def trace_failure(e: BaseException) -> tuple[str, object] | None:
    """(kind, op) when `e` is one of fake tensors' refusals to size an op without its data (the kinds above;
    op is None for a guard on a data-dependent value), else None."""
    from torch._subclasses import fake_tensor as ft
    from torch.fx.experimental import symbolic_shapes as ss
    if isinstance(e, ft.DynamicOutputShapeException):
        return DYNAMIC_OUTPUT_SHAPE, e.func
    if isinstance(e, ft.UnsupportedOperatorException):
        return NO_FAKE_IMPLEMENTATION, e.func
    if isinstance(e, ft.DataDependentOutputException):
        return DATA_DEPENDENT_OUTPUT, e.func
    if isinstance(e, ss.GuardOnDataDependentSymNode):
        return GUARD_ON_DATA, None
    return None


@contextlib.contextmanager
def modes_set_aside():
    """Within: no dispatch mode of the caller's is active (a partitioner runs inside the compiler's fake
    tensor mode; real kernels run with it set aside)."""
    from torch.utils._python_dispatch import _disable_current_modes
    with _disable_current_modes():
        yield


# --------------------------------------------------------------------------------------------
# Tracing a training step (aot_autograd)


@contextlib.contextmanager
def compiling():
    """Within: ``torch.compiler.is_compiling()`` is true, as under torch.compile, so that libraries take
    their trace-friendly paths (torch.export sets the same flag). A PyTorch without the flag: unchanged."""
    old = getattr(torch.compiler, "_is_compiling_flag", None)
    if old is None:
        yield
        return
    torch.compiler._is_compiling_flag = True
    try:
        yield
    finally:
        torch.compiler._is_compiling_flag = old


def export_joint(module: torch.nn.Module, args: tuple):
    """aot_autograd's joint graph (forward and backward in one functional ATen graph) of `module`, whose
    first output is the loss: (graph module, graph signature)."""
    from torch._functorch.aot_autograd import aot_export_module
    return aot_export_module(module, args, trace_joint=True, output_loss_index=0)


def aot_function_uncompiled(fn: Callable, partition_fn: Callable) -> Callable:
    """`fn` run by aot_autograd with `partition_fn` and no code generation: the partitioned FX graphs run as
    they are, with FX's boxed calling convention (the graph clears its argument list, so the tensors
    saved for the backward die at their last use rather than when the backward returns)."""
    from torch._functorch.aot_autograd import aot_function

    def boxed(gm, _example):
        gm.graph.set_codegen(torch.fx.graph._BoxedCodeGen())
        gm.recompile()
        return gm
    return aot_function(fn, fw_compiler=boxed, bw_compiler=boxed, partition_fn=partition_fn)


def op_schema(target):
    """The schema of an ATen op overload (its arguments, their alias annotations), or None."""
    return getattr(target, "_schema", None)


def is_op_overload(target) -> bool:
    """Whether an FX node's target is an ATen op overload (``aten.mm.default``), not a Python function."""
    return isinstance(target, torch._ops.OpOverload)


# --------------------------------------------------------------------------------------------
# A module's own tables of parameters and buffers (torch.nn.Module's private dicts)


def tensor_tables(module: torch.nn.Module) -> tuple[dict, dict]:
    """The dicts in which `module` holds its own parameters and buffers (not its children's). Replacing an
    entry swaps the tensor without registering anything anew."""
    return module._parameters, module._buffers


@contextlib.contextmanager
def parameters_as_buffers(names: Iterable[tuple[torch.nn.Module, str]]):
    """Within: each (module, leaf name) is a non-persistent buffer on the parameter's storage instead of a
    parameter (a tied parameter's name the step does not read, which aot_autograd would otherwise expect
    a gradient for). On exit the modules hold their parameters again, in their order."""
    moved = []
    try:
        for mod, leaf in names:
            p = mod._parameters[leaf]
            moved.append((mod, dict(mod._parameters)))
            del mod._parameters[leaf]
            mod.register_buffer(leaf, p.detach(), persistent=False)
        yield
    finally:
        for mod, params in reversed(moved):
            for leaf in params:
                if leaf not in mod._parameters:
                    mod._buffers.pop(leaf, None)
                    mod._non_persistent_buffers_set.discard(leaf)
            mod._parameters.clear()
            mod._parameters.update(params)


# --------------------------------------------------------------------------------------------
# The profiler's memory events (kineto's results)


def profiler_events(prof) -> list:
    """The raw events of a finished ``torch.profiler.profile`` (kineto's), each with ``name()``,
    ``start_ns()``, ``duration_ns()`` and, for memory events, ``nbytes()`` and ``device_type()``."""
    return list(prof.profiler.kineto_results.events())


def cpu_device_types() -> tuple:
    """The device types of the profiler's memory events that are CPU memory (PyTorch's own profiler counts
    these three as CPU memory)."""
    from torch.autograd import DeviceType
    return DeviceType.CPU, DeviceType.MKLDNN, DeviceType.IDEEP


# --------------------------------------------------------------------------------------------
# Inductor's partitioner interface and its heuristics


def partitioner_base() -> type:
    """The base class of ``torch._inductor.config.custom_partitioner_fn`` objects (``CustomPartitionerFn``:
    a callable with a ``uuid()`` for Inductor's caches)."""
    from torch._inductor.custom_graph_pass import CustomPartitionerFn
    return CustomPartitionerFn


def split_joint(gm: torch.fx.GraphModule, saved: Sequence, saved_sym_nodes: Sequence, num_fwd_outputs: int,
                static_lifetime_inputs: Sequence):
    """aot_autograd's own split of a joint graph into (forward module, backward module), the forward
    returning its outputs and then `saved` (and the symbolic sizes `saved_sym_nodes`) for the backward."""
    from torch._functorch.partitioners import _extract_fwd_bwd_modules
    from torch.utils._ordered_set import OrderedSet
    return _extract_fwd_bwd_modules(gm, list(saved), saved_sym_nodes=list(saved_sym_nodes),
                                    num_fwd_outputs=num_fwd_outputs,
                                    static_lifetime_input_nodes=OrderedSet(static_lifetime_inputs))


_FUSION_GUARDS = ("fusion_memory_timeline_peak_memory_increase_gb",
                  "fusion_memory_timeline_peak_memory_pct_threshold")


def guard_fusion_memory() -> None:
    """Inductor's fusion memory guard on (no fusion that raises the compiled graph's estimated peak), unless
    the user set either of its thresholds; a PyTorch without the guard is left as it is."""
    import torch._inductor.config as inductor_config
    if all(hasattr(inductor_config, n) for n in _FUSION_GUARDS) and \
            all(getattr(inductor_config, n) is None for n in _FUSION_GUARDS):
        setattr(inductor_config, _FUSION_GUARDS[0], 0.0)


def guard_buffer_pool() -> None:
    """Inductor's buffer pool off (``allow_buffer_reuse``: a dead buffer kept for a later allocation of its
    size), as its lite mode has it; a PyTorch without the option is left as it is."""
    import torch._inductor.config as inductor_config
    if hasattr(inductor_config, "allow_buffer_reuse"):
        inductor_config.allow_buffer_reuse = False


def inductor_lays_out_channels_last(gm: torch.fx.GraphModule) -> bool:
    """Whether Inductor's layout optimisation (``GraphLowering.decide_layout_opt``) runs `gm`'s 2-D
    convolutions channels-last; False where the heuristic fails (measure as laid out)."""
    from torch._inductor.graph import GraphLowering
    try:
        return bool(GraphLowering.decide_layout_opt(gm, is_inference=False))
    except Exception:  # noqa: BLE001 - a heuristic of Inductor's that changed: measure as laid out
        return False


# --------------------------------------------------------------------------------------------
# Symbolic sizes (dynamic shapes)

# What a size no trace value backs (data-dependent) counts as: Inductor's own fallback.
UNBACKED_SIZE = 8192


_SIZES_AT: dict = {}  # symbol name -> value, while `sizes_at` is active


@contextlib.contextmanager
def sizes_at(values: dict):
    """Within it, `size_hint` reads a symbolic size with its symbols at `values` ({"s0": 80}: Dynamo's symbol
    names) instead of the values Dynamo traced; symbols not named keep their hints."""
    saved = dict(_SIZES_AT)
    _SIZES_AT.update(values)
    try:
        yield
    finally:
        _SIZES_AT.clear()
        _SIZES_AT.update(saved)


def size_hint(x) -> int:
    """A size as an int; a symbolic one (``dynamic=True``) at the value Dynamo traced it with (or as
    `sizes_at` says), read without adding a guard. PyTorch 2.15 names the reader ``optimization_hint``;
    earlier releases ``hint_int``."""
    if not isinstance(x, torch.SymInt):
        return int(x)
    if _SIZES_AT:
        expr = x.node.expr
        at = {sym: _SIZES_AT[str(sym)] for sym in expr.free_symbols if str(sym) in _SIZES_AT}
        if at:
            value = expr.xreplace(at)  # a plain int where the expression is the symbol itself
            if isinstance(value, int) or getattr(value, "is_number", False):
                return int(value)
    from torch.fx.experimental import symbolic_shapes
    read = getattr(symbolic_shapes, "optimization_hint", None) or getattr(symbolic_shapes, "hint_int")
    return int(read(x, fallback=UNBACKED_SIZE))


def hinted_shape(t: torch.Tensor) -> tuple[tuple, tuple]:
    """`t`'s shape and strides as ints (symbolic sizes at the values Dynamo traced)."""
    return tuple(size_hint(s) for s in t.shape), tuple(size_hint(s) for s in t.stride())


def is_symbolic(x) -> bool:
    """Whether `x` is a symbolic scalar (a size Dynamo keeps symbolic)."""
    return isinstance(x, (torch.SymInt, torch.SymFloat, torch.SymBool))


def compiled_region_runs(loss: torch.Tensor) -> list:
    """One entry per run of a compiled region in the autograd graph of `loss`, in the forward's order (the
    nodes' sequence numbers): the region's autograd Function class (aot_autograd makes one per compiled
    region, so two runs of one region's code have the same class)."""
    seen, stack, found = set(), [loss.grad_fn], {}
    while stack:
        node = stack.pop()
        if node is None or node in seen:
            continue
        seen.add(node)
        cls = getattr(type(node), "_forward_cls", None)
        if cls is not None and cls.__name__ == "CompiledFunction":
            found[node._sequence_nr()] = cls
        stack.extend(f for f, _ in node.next_functions)
    return [found[k] for k in sorted(found)]
