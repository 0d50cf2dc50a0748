"""Cost models for exported graphs: the three the C++ side has, and PyTorch's.

``roofline:DEVICE`` and ``fused:DEVICE`` mirror ``include/memplan/cost/model.hpp``
and ``cost/device.hpp`` formula for formula (the device table is copied here and
checked against the C++ one by ``tests/test_costs.py``): an op costs
max(flops / rate, bytes moved / bandwidth) microseconds, with the matrix rate of the
op's precision for matrix products (fp32, fp16/bf16 or fp8: its narrowest floating
operand) and the other rate otherwise; under ``fused`` a point-wise op is
folded into the kernel of its producer and pays only its arithmetic and the
reads that no producer hands it. ``measured`` runs the joint graph node by node on
the device its tensors live on and records each op's median time (``measured:cpu`` and
``measured:cuda`` also insist on that device); on CUDA each node is timed by a pair of
events on the current stream, not by host clocks, which would time its launch. The graph
says where the costs were measured (``measured:cpu``, ``measured:cuda:NVIDIA H200``).
``flops`` is the runtime estimate of PyTorch's own activation-budget partitioner
(``activation_memory_budget_runtime_estimator = "flops"``): an op costs the
FLOPs PyTorch's flop counter gives it, and at least 1, so point-wise ops,
reductions and copies are nearly free. Its unit is the flop (``cost_unit``
"flop"): it exists so that memplan can be compared with PyTorch's partitioner
under PyTorch's cost model, not as a model of time.
"""
from __future__ import annotations

import dataclasses
import statistics
from typing import Callable

import torch

from . import device as _device

# cost/device.hpp: name -> (fp32 matrix flop/s, other flop/s, bytes/s, fp16/bf16 matrix flop/s, fp8 matrix
# flop/s); a matrix rate of 0: the device has no faster units for it (fp8 runs at the half rate, half at the
# fp32 rate). Dense rates of the SXM boards' data sheets; fp32 matrix products at TF32 on H100/H200.
DEVICES = {
    "v100": (15.7e12, 15.7e12, 0.9e12, 125e12, 0),
    "h100": (494e12, 67e12, 3.35e12, 989e12, 1979e12),
    "h200": (494e12, 67e12, 4.8e12, 989e12, 1979e12),
}

MATMUL, OTHER, POINTWISE = "matmul", "other", "pointwise"
# cost::precision: the precision of an op's matrix products (fp16 and bf16 alike).
FP32, HALF, FP8 = "fp32", "half", "fp8"
PRECISIONS = (FP32, HALF, FP8)


@dataclasses.dataclass
class OpWork:
    """What one op does (cost::op_work)."""
    kind: str = OTHER
    flops: float = 0.0
    bytes_read: float = 0.0
    bytes_written: float = 0.0
    producer_bytes: float = 0.0
    precision: str = FP32


def precision_of(dtypes) -> str:
    """The precision an op's matrix products run in: its narrowest floating operand's (fp8 types: "fp8",
    fp16/bf16: "half", else "fp32"); integer and boolean operands do not count."""
    out = None
    for d in dtypes:
        if not d.is_floating_point:
            continue
        if "float8" in str(d):
            return FP8
        if d.itemsize == 2:
            out = HALF
        elif out is None:
            out = FP32
    return out or FP32


def matmul_rate(device: str, precision: str = FP32) -> float:
    """The matrix rate (flop/s) of `device` for products in `precision` (cost::device_profile::matmul_rate)."""
    mm, _, _, half, fp8 = DEVICES[device]
    half = half if half > 0 else mm
    if precision == FP8:
        return fp8 if fp8 > 0 else half
    return half if precision == HALF else mm


def roofline_us(device: str, kind: str, flops: float, nbytes: float, precision: str = FP32) -> float:
    _, other, bw, _, _ = DEVICES[device]
    rate = matmul_rate(device, precision) if kind == MATMUL else other
    return max(flops / rate, nbytes / bw) * 1e6


def parse(spec: str) -> tuple[str, str]:
    """'roofline:v100' -> ('roofline', 'v100'); 'measured' -> ('measured', '') (the device of the model's
    tensors); 'measured:cpu' -> ('measured', 'cpu'); 'measured:cuda' -> ('measured', 'cuda'); 'flops' ->
    ('flops', '')."""
    kind, _, device = spec.partition(":")
    if kind == "flops":
        if device:
            raise ValueError(f"cost model '{spec}': flops has no device")
        return "flops", ""
    if kind == "measured":
        if device not in ("", "cpu", "cuda"):
            raise ValueError(f"cost model '{spec}': measured costs are taken on the device of the model's tensors: "
                             "'measured', 'measured:cpu' or 'measured:cuda'")
        return "measured", device
    if kind not in ("roofline", "fused"):
        raise ValueError(f"unknown cost model '{spec}': expected roofline:DEVICE, fused:DEVICE, "
                         "measured[:cpu|:cuda] or flops")
    device = device or "v100"
    if device not in DEVICES:
        raise ValueError(f"cost model '{spec}': unknown device '{device}' (known: {', '.join(DEVICES)})")
    return kind, device


def unit(spec: str) -> str:
    """The unit of the costs `spec` gives: "flop" for flops, "us" (microseconds) for the others."""
    return "flop" if parse(spec)[0] == "flops" else "us"


def model_us(spec: str, w: OpWork) -> float:
    """The cost of `w` under roofline:DEVICE or fused:DEVICE (microseconds), or flops (FLOPs: matrix
    products' FLOPs, every other op 1, as PyTorch's partitioner estimates runtime)."""
    kind, device = parse(spec)
    if kind == "flops":
        return max(w.flops if w.kind == MATMUL else 0.0, 1.0)
    if kind == "fused" and w.kind == POINTWISE:
        return roofline_us(device, w.kind, w.flops, max(0.0, w.bytes_read - w.producer_bytes), w.precision)
    if kind == "measured":
        raise ValueError("measured costs come from running the graph (measure_node_times), not from a formula")
    return roofline_us(device, w.kind, w.flops, w.bytes_read + w.bytes_written, w.precision)


def measured_on(spec: str, device) -> str:
    """The label of measured costs taken on `device` ('measured:cpu', 'measured:cuda:NVIDIA H200'), after
    checking that `spec` ('measured', 'measured:cpu', 'measured:cuda') allows that device."""
    kind, want = parse(spec)
    if kind != "measured":
        raise ValueError(f"cost model '{spec}' is not measured")
    device = torch.device(device)
    if want and want != device.type:
        raise ValueError(f"cost model '{spec}': the model's tensors are on {device}; measured costs are taken "
                         f"where they are (use 'measured' or 'measured:{device.type}', or move the model)")
    return "measured:" + _device.label(device)


class _TimingInterpreter(torch.fx.Interpreter):
    def __init__(self, gm, timer: _device.Timer, order: list):
        super().__init__(gm, garbage_collect_values=True)
        self.timer, self.order = timer, order

    def run_node(self, n):
        if n.op != "call_function":
            return super().run_node(n)
        self.timer.start()
        out = super().run_node(n)
        self.timer.stop()
        self.order.append(n.name)
        return out


def measure_node_times(gm: torch.fx.GraphModule, args: list, repeats: int = 3,
                       progress: Callable[[str], None] | None = None) -> dict[str, float]:
    """Median microseconds of every call_function node of `gm`, run `repeats` times on `args` (after one
    warm-up run), on the device of `args`: host clocks on the CPU, CUDA events on the current stream
    (``device.Timer``). Every run starts from the same random state (random nodes do the same work each
    time), and the caller's generators are left as they were."""
    dev = _device.of(args)
    times: dict[str, list[float]] = {}
    with torch.no_grad(), _device.preserved_rng([dev]):
        start = [(d, _device.rng_state(d)) for d in {torch.device("cpu"), dev}]
        for r in range(repeats + 1):
            if progress:
                progress(f"measuring costs on {dev}: run {r + 1} of {repeats + 1}" + (" (warm-up)" if r == 0 else ""))
            for d, s in start:
                _device.set_rng_state(d, s)
            timer, order = _device.Timer(dev), []
            _TimingInterpreter(gm, timer, order).run(*args)
            us = timer.results()
            if r > 0:
                for k, v in zip(order, us):
                    times.setdefault(k, []).append(v)
    return {k: statistics.median(v) for k, v in times.items()}


def measure_update_us(param: torch.Tensor, optimizer: str, repeats: int = 5) -> float:
    """Median microseconds of one optimizer update of a tensor shaped like `param`, on the device `param`
    lives on (SGD: w -= lr * g; Adam and AdamW: both moments, the bias-corrected step), on scratch copies, after one
    warm-up update."""
    with torch.no_grad():
        w = torch.zeros_like(param)
        g = torch.ones_like(w)
        m, v = torch.zeros_like(w), torch.zeros_like(w)
        timer = _device.Timer(w.device)
        for _ in range(repeats + 1):
            timer.start()
            if optimizer in ("adam", "adamw"):
                m.mul_(0.9).add_(g, alpha=0.1)
                v.mul_(0.999).addcmul_(g, g, value=0.001)
                w.addcdiv_(m, v.sqrt().add_(1e-8), value=-1e-3)
            else:
                w.add_(g, alpha=-0.1)
            timer.stop()
        return statistics.median(timer.results()[1:])
