"""Measuring on a device: the CPU's peak counts CPU memory only, workspaces are taken after a warm-up and
labelled with the device, and a step's tensors must be on one device."""
import pytest
import torch
from torch.autograd import DeviceType

import memplan_torch as mt
from memplan_torch import device, probe, workspaces

import models


class _Event:
    """A profiler memory event as kineto reports it (the methods measure reads)."""

    def __init__(self, t, nbytes, dev):
        self.t, self.n, self.dev = t, nbytes, dev

    def name(self):
        return "[memory]"

    def start_ns(self):
        return self.t

    def nbytes(self):
        return self.n

    def device_type(self):
        return self.dev


def test_cpu_peak_counts_only_the_cpus_events():
    # On a CUDA machine the profiler also reports the GPU allocator's events; they are not CPU memory.
    events = [_Event(1, 100, DeviceType.CPU), _Event(2, 1 << 20, DeviceType.CUDA), _Event(3, -100, DeviceType.CPU),
              _Event(4, 60, DeviceType.CPU), _Event(5, -(1 << 20), DeviceType.CUDA), _Event(6, 8, DeviceType.MKLDNN)]
    assert probe.running_peak(probe.cpu_memory_events(events)) == 100
    events.append(_Event(7, 50, DeviceType.CPU))
    assert probe.running_peak(probe.cpu_memory_events(events)) == 118


def test_step_measured_on_the_cpu():
    n = 1 << 18  # floats: 1 MiB

    def step():
        a = torch.ones(n)
        b = a * 2  # both live: 2 MiB above what was allocated before
        return b.sum()

    m = probe.measure_step(step, resident=1000)
    assert m.device == "cpu" and m.max_allocated is None and m.max_reserved is None
    assert 1000 + 2 * 4 * n <= m.peak < 1000 + 3 * 4 * n
    assert m.result.item() == 2 * n
    assert probe.peak_of(step, 1000)[0] == m.peak
    with pytest.raises(ValueError, match="meta"):
        probe.measure_step(step, device="meta")


_calls = {"cold": 0}


def _cold_temporary(x):
    _calls["cold"] += 1
    if _calls["cold"] == 1:  # a first run's one-off allocation (a cache, a lazily made workspace)
        tmp = torch.ones(1 << 20)
        del tmp
    return x * 2


torch.fx.wrap("_cold_temporary")


class _Cold(torch.nn.Module):
    def forward(self, x):
        return _cold_temporary(x) + 1


def test_a_warm_up_run_hides_what_a_first_run_allocates_once():
    # On the CPU no warm-up by default (PyTorch's kernels allocate nothing once through its allocator); CUDA's one.
    gm = torch.fx.symbolic_trace(_Cold())
    x = torch.ones(16)
    _calls["cold"] = 0
    cold = workspaces.node_workspaces(gm, [x])
    assert cold.get("_cold_temporary", 0) > 3 << 20  # the cold run sees the one-off 4 MiB
    assert _calls["cold"] == 1
    _calls["cold"] = 0
    assert workspaces.node_workspaces(gm, [x], warmup=1).get("_cold_temporary", 0) < 1 << 20
    assert _calls["cold"] == 2


def test_workspaces_are_labelled_with_the_device():
    model, inputs, targets, _ = models.small_cnn()
    g = mt.export(model, inputs, targets=targets)
    assert g["memplan_torch"]["workspace"] == "measured:cpu" and g["memplan_torch"]["device"] == "cpu"
    assert any(op.get("workspace", 0) > 0 for op in g["ops"] if op["phase"] != "update")
    assert mt.export(model, inputs, targets=targets, workspace="none")["memplan_torch"]["workspace"] == "none"
    with pytest.raises(mt.ExportError, match=r"workspace 'cuda'.*tensors are on cpu"):
        mt.export(model, inputs, targets=targets, workspace="cuda")


def test_a_step_is_on_one_device():
    assert device.of([torch.ones(1), 3, torch.ones(2)]) == torch.device("cpu")
    assert device.of([]) == torch.device("cpu")
    with pytest.raises(ValueError, match="cpu and meta"):
        device.of([torch.ones(1), torch.ones(1, device="meta")])
    assert device.label("cpu") == "cpu"


def test_preserved_rng_restores_the_cpu_generator():
    torch.manual_seed(3)
    state = torch.get_rng_state()
    with device.preserved_rng(["cpu"]):
        torch.manual_seed(4)
        torch.rand(10)
    assert torch.equal(torch.get_rng_state(), state)


def test_an_op_alone_on_zeros_has_the_workspace_it_has_in_the_step():
    # What the partitioner measures (each op alone, zero-filled inputs of its fake values' shapes) against what
    # the export measures (a run of the whole step on the real inputs), on the convolutions of a small CNN.
    from memplan_torch.graph.step_graph import export_step
    from memplan_torch.step.joint import autocast_as
    model, inputs, targets, _ = models.small_cnn()
    _, joint, _ = export_step(model, inputs, targets=targets, workspace="none")
    with autocast_as(()):
        whole = workspaces.node_workspaces(joint.gm, joint.placeholder_values(tuple(inputs) + tuple(targets)))
    convs = lambda n: "convolution" in str(n.target)  # noqa: E731
    alone = workspaces.op_workspaces(joint.gm, convs)
    names = [n.name for n in joint.gm.graph.nodes if n.op == "call_function" and convs(n)]
    assert names and any(whole.get(n, 0) > 0 for n in names)
    assert {n: alone.get(n, 0) for n in names} == {n: whole.get(n, 0) for n in names}
