"""Peak memory of a training step, on the CPU by PyTorch's profiler, on CUDA by the allocator's statistics.

On the CPU, the profiler's memory events (``profile_memory=True``) record every
allocation and free of PyTorch's CPU allocator with its size; the running sum of the
CPU's events over the step (events of other devices are left out), plus the bytes
already allocated when it starts (weights, buffers, optimizer state, inputs: passed in
as `resident`), is the memory the step holds; its maximum is the step's peak. This
counts tensors' bytes as the allocator hands them out (the CPU allocator does not
cache), so it is directly comparable with a plan's live bytes.

On CUDA, the caching allocator counts the same thing itself: ``max_memory_allocated``
after ``reset_peak_memory_stats`` is the largest sum of the bytes of live blocks
(tensors' bytes rounded up to 512); its rise over ``memory_allocated`` at the start,
plus `resident`, is the step's peak. ``max_memory_reserved`` (what the allocator holds
from the driver, cached blocks included) is reported beside it.
"""
from __future__ import annotations

import contextlib
import dataclasses
import os
import time
from typing import Callable, Iterable

import torch

from . import device as _device


def storage_bytes(tensors: Iterable[torch.Tensor]) -> int:
    """Bytes of the distinct storages of `tensors` (a tied weight counts once)."""
    seen, total = set(), 0
    for t in tensors:
        if t is None:
            continue
        s = t.untyped_storage()
        key = s.data_ptr()
        if key in seen:
            continue
        seen.add(key)
        total += s.nbytes()
    return total


@contextlib.contextmanager
def _quiet_stderr():
    """Kineto prints start/stop lines on stderr at the C level; keep them out of tables."""
    try:
        fd = os.dup(2)
    except OSError:
        yield
        return
    with open(os.devnull, "w") as null:
        os.dup2(null.fileno(), 2)
        try:
            yield
        finally:
            os.dup2(fd, 2)
            os.close(fd)


def _cpu_events(events) -> list:
    """The profiler's memory events of the CPU's allocators (PyTorch's own profiler counts these three
    device types as CPU memory), as (start ns, bytes), in time order (events at the same time in the
    profiler's order)."""
    from torch.autograd import DeviceType
    cpu = (DeviceType.CPU, DeviceType.MKLDNN, DeviceType.IDEEP)
    mem = [(e.start_ns(), e.nbytes()) for e in events if e.name() == "[memory]" and e.device_type() in cpu]
    mem.sort(key=lambda m: m[0])
    return mem


def _running_peak(mem) -> int:
    cur = peak = 0
    for _, nbytes in mem:
        cur += nbytes
        peak = max(peak, cur)
    return peak


@dataclasses.dataclass
class StepMemory:
    """What one measured call of a step held."""
    peak: int                    # resident + the largest rise of the allocated bytes during the call
    seconds: float
    result: object
    device: str                  # where it ran: "cpu", "cuda:NVIDIA H200" (device.label)
    max_allocated: int | None = None   # CUDA: torch.cuda.max_memory_allocated over the call (all tensors)
    max_reserved: int | None = None    # CUDA: torch.cuda.max_memory_reserved over the call


def measure_step(step: Callable[[], object], resident: int = 0, device="cpu") -> StepMemory:
    """One call of `step` on `device`, measured: on the CPU by the profiler's CPU memory events, on CUDA by
    the caching allocator's statistics (peak statistics reset first; the device is synchronised before
    and after, so the seconds are the step's work)."""
    device = torch.device(device)
    if device.type == "cuda":
        torch.cuda.synchronize(device)
        torch.cuda.reset_peak_memory_stats(device)
        before = torch.cuda.memory_allocated(device)
        t0 = time.perf_counter()
        out = step()
        torch.cuda.synchronize(device)
        seconds = time.perf_counter() - t0
        top = torch.cuda.max_memory_allocated(device)
        return StepMemory(peak=resident + top - before, seconds=seconds, result=out, device=_device.label(device),
                          max_allocated=top, max_reserved=torch.cuda.max_memory_reserved(device))
    if device.type != "cpu":
        raise ValueError(f"measuring a step on '{device}' is not supported (cpu and cuda are)")
    from torch.profiler import ProfilerActivity, profile

    with _quiet_stderr():
        with profile(activities=[ProfilerActivity.CPU], profile_memory=True) as prof:
            t0 = time.perf_counter()
            out = step()
            seconds = time.perf_counter() - t0
    peak = _running_peak(_cpu_events(prof.profiler.kineto_results.events()))
    return StepMemory(peak=resident + peak, seconds=seconds, result=out, device="cpu")


def peak_of(step: Callable[[], object], resident: int = 0, device="cpu") -> tuple[int, float, object]:
    """(peak bytes, seconds, step's result) of one call of `step` (``measure_step``): `resident` plus the
    largest rise of what the allocator of `device` hands out during the call."""
    m = measure_step(step, resident, device)
    return m.peak, m.seconds, m.result


def timed(step: Callable[[], object], repeats: int = 3, device="cpu") -> float:
    """Median seconds of `step` over `repeats` calls (after one warm-up call), unprofiled; on CUDA the
    device is synchronised around each call."""
    step()
    samples = []
    for _ in range(repeats):
        _device.synchronize(device)
        t0 = time.perf_counter()
        step()
        _device.synchronize(device)
        samples.append(time.perf_counter() - t0)
    samples.sort()
    return samples[len(samples) // 2]


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
        with _quiet_stderr():
            with profile(activities=[ProfilerActivity.CPU], profile_memory=True) as prof:
                _MarkingInterpreter(gm, garbage_collect_values=True).run(*args)
    return _range_workspaces(prof)


def _range_workspaces(prof) -> dict[str, int]:
    """Per ``memplan_torch::NAME`` range of a CPU profile with memory: the largest running sum of the CPU
    allocator's events inside it less what is still held at its end."""
    events = prof.profiler.kineto_results.events()
    ranges = []
    for e in events:
        name = e.name()
        if name.startswith("memplan_torch::"):
            ranges.append((e.start_ns(), e.start_ns() + e.duration_ns(), name[len("memplan_torch::"):]))
    mem = _cpu_events(events)
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
        if fmt is None or v.is_contiguous(memory_format=fmt):
            return v
        return _Formatted(v, fmt)

    def signature(v):
        if isinstance(v, _Formatted):
            return ("F", signature(v.fake), str(v.fmt))
        if isinstance(v, torch.Tensor):
            return ("T", tuple(v.shape), tuple(v.stride()), str(v.dtype), str(v.device))
        if isinstance(v, (list, tuple)):
            return tuple(signature(x) for x in v)
        return repr(v)

    def real(v):
        if isinstance(v, _Formatted):
            return torch.zeros(v.fake.shape, dtype=v.fake.dtype, device=v.fake.device).contiguous(memory_format=v.fmt)
        if isinstance(v, torch.Tensor):  # zeros: valid indices, finite values
            return torch.empty_strided(v.shape, v.stride(), dtype=v.dtype, device=v.device).zero_()
        if isinstance(v, (list, tuple)):
            return type(v)(real(x) for x in v)
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
    from torch.utils._python_dispatch import _disable_current_modes
    with _disable_current_modes(), torch.no_grad(), _device.preserved_rng([d for d in devices if d.type == "cuda"]):
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
            with _quiet_stderr():
                with profile(activities=[ProfilerActivity.CPU], profile_memory=True) as prof:
                    for n in first.values():
                        args, kwargs = (real(x) for x in arguments(n))
                        with torch.profiler.record_function("memplan_torch::" + n.name):
                            result = n.target(*args, **kwargs)
                        del result, args, kwargs
            measured = _range_workspaces(prof)
    return {name: measured[m] for name, m in same.items() if measured.get(m, 0) > 0}


@dataclasses.dataclass(frozen=True)
class _Formatted:
    """An argument of `op_workspaces` to be made in another memory format than its fake value's."""
    fake: torch.Tensor
    fmt: torch.memory_format


def _tensors_in(n: torch.fx.Node) -> list:
    vals = []
    torch.fx.node.map_aggregate(n.args, lambda a: vals.append(a.meta.get("val")) if isinstance(a, torch.fx.Node) else a)
    return vals


def _flat_state(model):
    params = dict(model.named_parameters())
    buffers = dict(model.named_buffers())
    return params, buffers


def aot_step(model, inputs, targets, loss_fn, partition_fn, capture: dict | None = None):
    """The training step of `model` run by aot_autograd with `partition_fn` and no code generation (the
    partitioned FX graphs run as they are). Returns a callable that runs forward and backward once (the
    gradients land in ``.grad``). `capture`, when given, receives the partition: ``fw``, ``bw`` (FX
    graph modules), ``joint`` and ``num_fwd_outputs``."""
    from functorch.compile import make_boxed_func
    from torch._functorch.aot_autograd import aot_function

    params, buffers = _flat_state(model)

    def fn(params, buffers, inputs, targets):
        out = torch.func.functional_call(model, {**params, **buffers}, tuple(inputs))
        return loss_fn(out, *targets)

    def part(joint, joint_inputs, **kw):
        fw, bw = partition_fn(joint, joint_inputs, **kw)
        if capture is not None:
            capture.update(fw=fw, bw=bw, joint=joint, num_fwd_outputs=kw.get("num_fwd_outputs"))
        return fw, bw

    def boxed(gm, _example):
        # FX's boxed calling convention: the graph takes its arguments as a list and clears it, so the
        # saved tensors that aot_autograd hands the backward (steal_args) die at their last use in the
        # graph rather than when the whole backward returns. The graph still runs as FX's Python code.
        gm.graph.set_codegen(torch.fx.graph._BoxedCodeGen())
        gm.recompile()
        return gm

    _ = make_boxed_func
    compiled = aot_function(fn, fw_compiler=boxed, bw_compiler=boxed, partition_fn=part)

    def step():
        loss = compiled(params, buffers, tuple(inputs), tuple(targets))
        loss.backward()
        return loss

    return step


def saved_bytes_of(capture: dict) -> int:
    """Bytes of the distinct storages the forward graph hands to the backward (its outputs past the
    forward's own), from their fake values; parameters and inputs the backward reads are not counted."""
    fw = capture["fw"]
    out = [n for n in fw.graph.nodes if n.op == "output"][0].args[0]
    saved = out[capture["num_fwd_outputs"]:]
    placeholders = {n.name for n in fw.graph.nodes if n.op == "placeholder"}
    from torch.multiprocessing.reductions import StorageWeakRef
    seen, total = set(), 0
    for n in fw.graph.nodes:  # views of weights and inputs are not saved activations
        v = n.meta.get("val")
        if n.op == "placeholder" and isinstance(v, torch.Tensor):
            seen.add(StorageWeakRef(v.untyped_storage()).cdata)
    for n in saved:
        if not isinstance(n, torch.fx.Node) or n.name in placeholders:
            continue
        v = n.meta.get("val")
        if not isinstance(v, torch.Tensor):
            continue
        k = StorageWeakRef(v.untyped_storage()).cdata
        if k in seen:
            continue
        seen.add(k)
        total += v.untyped_storage().nbytes()
    return total
