"""Peak memory of a training step on the CPU, measured by PyTorch's profiler.

The profiler's memory events (``profile_memory=True``) record every allocation and
free of PyTorch's CPU allocator with its size; their running sum over the step,
plus the bytes already allocated when it starts (weights, buffers, optimizer state,
inputs: passed in as `resident`), is the memory the step holds; its maximum is the
step's peak. This counts tensors' bytes as the allocator hands them out (the CPU
allocator does not cache), so it is directly comparable with a plan's live bytes.
"""
from __future__ import annotations

import contextlib
import os
import time
from typing import Callable, Iterable

import torch


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


def peak_of(step: Callable[[], object], resident: int = 0) -> tuple[int, float, object]:
    """(peak bytes, seconds, step's result) of one call of `step`: `resident` plus the largest running
    sum of the allocator's events during the call."""
    from torch.profiler import ProfilerActivity, profile

    with _quiet_stderr():
        with profile(activities=[ProfilerActivity.CPU], profile_memory=True) as prof:
            t0 = time.perf_counter()
            out = step()
            seconds = time.perf_counter() - t0
    events = [e for e in prof.profiler.kineto_results.events() if e.name() == "[memory]"]
    events.sort(key=lambda e: e.start_ns())
    cur = peak = 0
    for e in events:
        cur += e.nbytes()
        peak = max(peak, cur)
    return resident + peak, seconds, out


def timed(step: Callable[[], object], repeats: int = 3) -> float:
    """Median seconds of `step` over `repeats` calls (after one warm-up call), unprofiled."""
    step()
    samples = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        step()
        samples.append(time.perf_counter() - t0)
    samples.sort()
    return samples[len(samples) // 2]


class _MarkingInterpreter(torch.fx.Interpreter):
    def run_node(self, n):
        if n.op != "call_function":
            return super().run_node(n)
        with torch.profiler.record_function("memplan_torch::" + n.name):
            return super().run_node(n)


def node_workspaces(gm: torch.fx.GraphModule, args: list) -> dict[str, int]:
    """Bytes each call_function node of `gm` allocates beyond what it returns (its kernels' temporaries:
    im2col buffers, reorders, reductions), measured on one run of `gm` on `args` under the profiler:
    inside the node's range, the largest running sum of the allocator's events less what is still held
    at the range's end (the node's outputs)."""
    from torch.profiler import ProfilerActivity, profile

    with torch.no_grad(), torch.random.fork_rng(devices=[]):
        torch.manual_seed(0)
        with _quiet_stderr():
            with profile(activities=[ProfilerActivity.CPU], profile_memory=True) as prof:
                _MarkingInterpreter(gm, garbage_collect_values=True).run(*args)
    events = prof.profiler.kineto_results.events()
    ranges = []
    mem = []
    for e in events:
        name = e.name()
        if name == "[memory]":
            mem.append((e.start_ns(), e.nbytes()))
        elif name.startswith("memplan_torch::"):
            ranges.append((e.start_ns(), e.start_ns() + e.duration_ns(), name[len("memplan_torch::"):]))
    mem.sort()
    ranges.sort()
    out: dict[str, int] = {}
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
