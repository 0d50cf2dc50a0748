"""The Python cost models are the C++ ones: same device table, same formulas."""
import os
import re
import time

import pytest
import torch

from memplan_torch import costs

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def test_device_table_is_the_cpp_one():
    text = open(os.path.join(ROOT, "include", "memplan", "cost", "device.hpp")).read()
    found = dict((m.group(1), tuple(float(x) for x in m.group(2, 3, 4))) for m in re.finditer(
        r'inline constexpr device_profile \w+\{"(\w+)", ([\d.e]+), ([\d.e]+), ([\d.e]+)\}', text))
    assert found == costs.DEVICES


def test_roofline_and_fused():
    w = costs.OpWork(kind=costs.POINTWISE, flops=1e6, bytes_read=8e6, bytes_written=4e6, producer_bytes=8e6)
    mm, other, bw = costs.DEVICES["v100"]
    assert costs.model_us("roofline:v100", w) == pytest.approx(max(1e6 / other, 12e6 / bw) * 1e6)
    # Fused: the read its producer hands over is free, and so is the write (the producer's epilogue).
    assert costs.model_us("fused:v100", w) == pytest.approx(1e6 / other * 1e6)
    m = costs.OpWork(kind=costs.MATMUL, flops=1e12, bytes_read=1e6, bytes_written=1e6)
    assert costs.model_us("fused:h200", m) == costs.model_us("roofline:h200", m) == pytest.approx(1e12 / 400e12 * 1e6)
    # PyTorch's partitioner's estimate: matrix FLOPs, and 1 for anything else.
    assert costs.model_us("flops", m) == 1e12 and costs.model_us("flops", w) == 1.0
    assert costs.unit("flops") == "flop" and costs.unit("roofline:v100") == "us"
    for bad in ("roofline:tpu", "magic", "measured:gpu", "flops:v100"):
        with pytest.raises(ValueError):
            costs.parse(bad)


def test_measured_costs_are_labelled_by_the_device_they_were_taken_on():
    assert costs.parse("measured") == ("measured", "")  # the device of the model's tensors
    assert costs.parse("measured:cpu") == ("measured", "cpu")
    assert costs.parse("measured:cuda") == ("measured", "cuda")
    assert costs.measured_on("measured", "cpu") == costs.measured_on("measured:cpu", "cpu") == "measured:cpu"
    with pytest.raises(ValueError, match=r"tensors are on cpu.*'measured:cpu'"):
        costs.measured_on("measured:cuda", "cpu")


_calls = {"slow": 0}


def _slow_first_call(x):
    _calls["slow"] += 1
    if _calls["slow"] == 1:
        time.sleep(0.3)  # a cold first run (caches, lazy initialisation) must not become the node's cost
    return x * 2


torch.fx.wrap("_slow_first_call")


class _Cold(torch.nn.Module):
    def forward(self, x):
        return _slow_first_call(x) + 1


def test_measured_node_times_leave_out_the_warm_up_and_the_callers_random_state():
    gm = torch.fx.symbolic_trace(_Cold())
    _calls["slow"] = 0
    state = torch.get_rng_state()
    times = costs.measure_node_times(gm, [torch.ones(4)], repeats=3)
    assert _calls["slow"] == 4  # the warm-up and three timed runs
    assert set(times) == {"_slow_first_call", "add"}
    assert 0 < times["_slow_first_call"] < 0.1e6  # microseconds: the 0.3 s first run is not in the median
    assert torch.equal(torch.get_rng_state(), state)


def test_measured_cost_graph_is_labelled_and_leaves_the_random_stream_alone():
    import memplan_torch as mt
    import models
    model, inputs, targets, _ = models.small_cnn()  # it has a dropout
    state = torch.get_rng_state()
    g = mt.export(model, inputs, targets=targets, cost="measured", workspace="none")
    assert torch.equal(torch.get_rng_state(), state)
    assert g["cost_model"] == "measured:cpu" and g["cost_unit"] == "us"
    assert all(op["cost"] > 0 for op in g["ops"])  # every op, the updates too, was timed
    with pytest.raises(mt.ExportError, match=r"measured:cuda.*tensors are on cpu"):
        mt.export(model, inputs, targets=targets, cost="measured:cuda", workspace="none")
