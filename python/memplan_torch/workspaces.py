"""Workspaces: the bytes an op allocates beyond what it returns (its kernels' temporaries: im2col buffers,
reorders, reductions, cuDNN and cuBLAS workspaces), measured on the device the step runs on.

Two ways: ``node_workspaces`` runs a whole joint graph on its real arguments (what the export measures), and
``op_workspaces`` runs chosen nodes alone on zero-filled tensors shaped as their fake values (what a
partitioner, which has fake tensors only, measures). On the CPU both read the profiler's memory events inside
a range around each node; on CUDA the caching allocator's peak while the node runs.
"""
from __future__ import annotations

import dataclasses
from typing import Callable

import torch
import torch.fx

from . import _compat
from . import device as _device
from .probe import cpu_memory_events, quiet_stderr


class _MarkingInterpreter(torch.fx.Interpreter):
    def run_node(self, n):
        if n.op != "call_function":
            return super().run_node(n)
        with torch.profiler.record_function("memplan_torch::" + n.name):
            return super().run_node(n)


class _CudaWorkspaceInterpreter(torch.fx.Interpreter):
    """Each node's rise of the CUDA allocator's peak above what is allocated when it returns."""

    def __init__(self, gm, device, out: dict):
        super().__init__(gm, garbage_collect_values=True)
        self.device, self.out = device, out

    def run_node(self, n):
        if n.op != "call_function":
            return super().run_node(n)
        torch.cuda.reset_peak_memory_stats(self.device)
        result = super().run_node(n)
        ws = torch.cuda.max_memory_allocated(self.device) - torch.cuda.memory_allocated(self.device)
        if ws > 0:
            self.out[n.name] = max(self.out.get(n.name, 0), int(ws))
        return result


def node_workspaces(gm: torch.fx.GraphModule, args: list, warmup: int | None = None) -> dict[str, int]:
    """Bytes each call_function node of `gm` allocates beyond what it returns (its kernels' temporaries:
    im2col buffers, reorders, reductions, cuDNN workspaces), measured on the device of `args` by one run
    of `gm` after `warmup` unmeasured runs. On CUDA one by default: a first run allocates what later runs
    reuse (cuBLAS's workspace, cuDNN's plans). On the CPU none by default: what a first run sets up for
    later ones (oneDNN's primitive caches) does not come from PyTorch's allocator, and a warm-up run left
    the workspaces of all 16 models of bench/torch/coverage.py byte-identical. On the CPU, under the
    profiler: inside the node's range, the largest running sum of the CPU allocator's events less what is
    still held at the range's end (the node's outputs). On CUDA, from the caching allocator: the peak while
    the node runs less what is allocated when it returns. Random nodes draw from the caller's generators,
    which are left as they were."""
    dev = _device.of(args)
    if dev.type not in ("cpu", "cuda"):
        raise ValueError(f"measuring workspaces on '{dev}' is not supported (cpu and cuda are)")
    if warmup is None:
        warmup = 1 if dev.type == "cuda" else 0
    with torch.no_grad(), _device.preserved_rng([dev]):
        start = [(d, _device.rng_state(d)) for d in {torch.device("cpu"), dev}]

        def fresh_rng():
            for d, st in start:
                _device.set_rng_state(d, st)

        for _ in range(warmup):
            fresh_rng()
            torch.fx.Interpreter(gm, garbage_collect_values=True).run(*args)
        fresh_rng()
        if dev.type == "cuda":
            out: dict[str, int] = {}
            torch.cuda.synchronize(dev)
            _CudaWorkspaceInterpreter(gm, dev, out).run(*args)
            torch.cuda.synchronize(dev)
            torch.cuda.reset_peak_memory_stats(dev)
            return out
        from torch.profiler import ProfilerActivity, profile
        with quiet_stderr():
            with profile(activities=[ProfilerActivity.CPU], profile_memory=True) as prof:
                _MarkingInterpreter(gm, garbage_collect_values=True).run(*args)
    return _range_workspaces(prof)


def _range_workspaces(prof) -> dict[str, int]:
    """Per ``memplan_torch::NAME`` range of a CPU profile with memory: the largest running sum of the CPU
    allocator's events inside it less what is still held at its end."""
    events = _compat.profiler_events(prof)
    ranges = []
    for e in events:
        name = e.name()
        if name.startswith("memplan_torch::"):
            ranges.append((e.start_ns(), e.start_ns() + e.duration_ns(), name[len("memplan_torch::"):]))
    mem = cpu_memory_events(events)
    ranges.sort()
    out = {}
    j = 0
    for lo, hi, node in ranges:
        while j < len(mem) and mem[j][0] < lo:
            j += 1
        cur = peak = 0
        k = j
        while k < len(mem) and mem[k][0] <= hi:
            cur += mem[k][1]
            peak = max(peak, cur)
            k += 1
        ws = peak - max(cur, 0)
        if ws > 0:
            out[node] = max(out.get(node, 0), int(ws))
    return out


def op_workspaces(gm: torch.fx.GraphModule, select: Callable[[torch.fx.Node], bool],
                  layout: Callable[[torch.fx.Node, torch.fx.Node], torch.memory_format | None] | None = None
                  ) -> dict[str, int]:
    """Workspaces of the call_function nodes `select` picks, each measured by running the node alone on
    zero-filled tensors shaped, strided and placed as its inputs' fake values (``meta["val"]``): what
    `node_workspaces` measures, without the graph's real inputs, its parameters or a run of the whole step
    (a partitioner has fake tensors only). ``layout(node, input)``, when given and not None for an input,
    is the memory format that input arrives in instead (a compiler that changes layouts: Inductor's
    channels-last convolutions). Nodes with the same op and argument shapes are measured once.
    Memory: one node's inputs and outputs at a time. Random nodes draw from the caller's generators, which
    are left as they were."""
    current: list = [None]  # the node whose arguments are being mapped, for `layout`

    def fake_of(a):
        if not isinstance(a, torch.fx.Node):
            return a
        v = a.meta.get("val")
        fmt = layout(current[0], a) if layout is not None and isinstance(v, torch.Tensor) else None
        # A view with gaps (a slice: a token dropped from a sequence) reaches the kernel as it is, which may
        # copy it (a convolution's backward makes its gradient dense): measured with its own strides.
        if fmt is None or v.is_contiguous(memory_format=fmt) or not _dense(v):
            return v
        return _Formatted(v, fmt)

    def signature(v):
        if isinstance(v, _Formatted):
            return ("F", signature(v.fake), str(v.fmt))
        if isinstance(v, torch.Tensor):
            return ("T", *_compat.hinted_shape(v), str(v.dtype), str(v.device))
        if isinstance(v, (list, tuple)):
            return tuple(signature(x) for x in v)
        if isinstance(v, dict):  # the keyword arguments (attention's attn_mask)
            return tuple((k, signature(x)) for k, x in v.items())
        return repr(v)

    def real(v):
        if isinstance(v, _Formatted):
            return torch.zeros(_compat.hinted_shape(v.fake)[0], dtype=v.fake.dtype,
                               device=v.fake.device).contiguous(memory_format=v.fmt)
        if isinstance(v, torch.Tensor):  # zeros: valid indices, finite values
            return torch.empty_strided(*_compat.hinted_shape(v), dtype=v.dtype, device=v.device).zero_()
        if isinstance(v, torch.SymInt):  # a symbolic size among the arguments: the traced one
            return _compat.size_hint(v)
        if isinstance(v, (list, tuple)):
            return type(v)(real(x) for x in v)
        if isinstance(v, dict):
            return {k: real(x) for k, x in v.items()}
        return v

    nodes = [n for n in gm.graph.nodes if n.op == "call_function" and select(n)]
    first: dict = {}    # signature -> first node of it
    same: dict = {}     # node name -> the node measured for it
    def arguments(n):
        current[0] = n
        return torch.fx.node.map_aggregate(n.args, fake_of), torch.fx.node.map_aggregate(n.kwargs, fake_of)

    for n in nodes:
        args, kwargs = arguments(n)
        key = (str(n.target), signature(args), signature(kwargs))
        if key in first:
            same[n.name] = first[key].name
            continue
        first[key] = n
        same[n.name] = n.name
    measured: dict[str, int] = {}
    devices = {v.device for n in first.values() for v in _tensors_in(n) if isinstance(v, torch.Tensor)}
    cuda = next((d for d in devices if d.type == "cuda"), None)
    # A partitioner runs inside the compiler's fake tensor mode: real kernels run with every mode set aside.
    with _compat.modes_set_aside(), torch.no_grad(), _device.preserved_rng([d for d in devices if d.type == "cuda"]):
        if cuda is not None:
            for n in first.values():
                args, kwargs = (real(x) for x in arguments(n))
                torch.cuda.synchronize(cuda)
                torch.cuda.reset_peak_memory_stats(cuda)
                result = n.target(*args, **kwargs)
                torch.cuda.synchronize(cuda)
                measured[n.name] = max(0, torch.cuda.max_memory_allocated(cuda) - torch.cuda.memory_allocated(cuda))
                del result, args, kwargs
        else:
            from torch.profiler import ProfilerActivity, profile
            with quiet_stderr():
                with profile(activities=[ProfilerActivity.CPU], profile_memory=True) as prof:
                    for n in first.values():
                        args, kwargs = (real(x) for x in arguments(n))
                        with torch.profiler.record_function("memplan_torch::" + n.name):
                            result = n.target(*args, **kwargs)
                        del result, args, kwargs
            measured = _range_workspaces(prof)
    return {name: measured[m] for name, m in same.items() if measured.get(m, 0) > 0}


def _dense(t: torch.Tensor) -> bool:
    """Whether `t`'s elements fill its strides without gaps or overlaps (in some order of its dimensions)."""
    shape, stride = _compat.hinted_shape(t)
    expected = 1
    for size, st in sorted(((sz, st) for sz, st in zip(shape, stride) if sz != 1), key=lambda x: x[1]):
        if st != expected:
            return False
        expected *= size
    return True


@dataclasses.dataclass(frozen=True)
class _Formatted:
    """An argument of `op_workspaces` to be made in another memory format than its fake value's."""
    fake: torch.Tensor
    fmt: torch.memory_format


def _tensors_in(n: torch.fx.Node) -> list:
    vals = []
    torch.fx.node.map_aggregate(n.args, lambda a: vals.append(a.meta.get("val")) if isinstance(a, torch.fx.Node) else a)
    return vals


