"""The ruler of tests and benches: the peak memory and time of a step, on the CPU by PyTorch's profiler, on
CUDA by the allocator's statistics; and a step run through aot_autograd with any partitioner, to measure
PyTorch's partitioners by the same ruler.

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
from torch.multiprocessing.reductions import StorageWeakRef

from . import _compat
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
def quiet_stderr():
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


def cpu_memory_events(events) -> list:
    """The profiler's memory events of the CPU's allocators, as (start ns, bytes), in time order (events at
    the same time in the profiler's order)."""
    cpu = _compat.cpu_device_types()
    mem = [(e.start_ns(), e.nbytes()) for e in events if e.name() == "[memory]" and e.device_type() in cpu]
    mem.sort(key=lambda m: m[0])
    return mem


def running_peak(mem) -> int:
    """The largest running sum of (time, bytes) events."""
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

    with quiet_stderr():
        with profile(activities=[ProfilerActivity.CPU], profile_memory=True) as prof:
            t0 = time.perf_counter()
            out = step()
            seconds = time.perf_counter() - t0
    peak = running_peak(cpu_memory_events(_compat.profiler_events(prof)))
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


def aot_step(model, inputs, targets, loss_fn, partition_fn, capture: dict | None = None):
    """The training step of `model` run by aot_autograd with `partition_fn` and no code generation (the
    partitioned FX graphs run as they are). Returns a callable that runs forward and backward once (the
    gradients land in ``.grad``). `capture`, when given, receives the partition: ``fw``, ``bw`` (FX
    graph modules), ``joint`` and ``num_fwd_outputs``."""
    params, buffers = dict(model.named_parameters()), dict(model.named_buffers())

    def fn(params, buffers, inputs, targets):
        out = torch.func.functional_call(model, {**params, **buffers}, tuple(inputs))
        return loss_fn(out, *targets)

    def part(joint, joint_inputs, **kw):
        fw, bw = partition_fn(joint, joint_inputs, **kw)
        if capture is not None:
            capture.update(fw=fw, bw=bw, joint=joint, num_fwd_outputs=kw.get("num_fwd_outputs"))
        return fw, bw

    compiled = _compat.aot_function_uncompiled(fn, part)

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
