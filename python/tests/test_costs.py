"""The Python cost models are the C++ ones: same device table, same formulas."""
import dataclasses
import os
import re
import time

import pytest
import torch

from memplan_torch import costs

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def test_device_table_is_the_cpp_one():
    text = open(os.path.join(ROOT, "include", "memplan", "cost", "device.hpp")).read()
    num = r"([\d.e]+)"
    found = dict((m.group(1), tuple(float(x) for x in m.group(2, 3, 4, 5, 6))) for m in re.finditer(
        r'inline constexpr device_profile \w+\{"(\w+)", ' + ", ".join([num] * 5) + r"\}", text))
    assert found == costs.DEVICES
    assert list(found) == ["v100", "h100", "h200"]


def _shared_cases():
    """The cases tests/unit/cost_model_test.cpp prices with the C++ models (shared_cases)."""
    text = open(os.path.join(ROOT, "tests", "unit", "cost_model_test.cpp")).read()
    body = text[text.index("// shared-cost-cases-begin"):text.index("// shared-cost-cases-end")]
    cases = re.findall(r'\{"([\w:]+)", cost::compute_kind::(\w+), cost::precision::(\w+), ([^}]+)\}', body)
    return [(model, kind, prec, *(float(x) for x in rest.split(","))) for model, kind, prec, rest in cases]


def test_the_cpp_models_cases_cost_the_same_here():
    cases = _shared_cases()
    assert len(cases) >= 10 and {c[0] for c in cases} >= {"roofline:h100", "fused:h100", "roofline:v100"}
    for model, kind, prec, flops, read, written, producer, us in cases:
        w = costs.OpWork(kind=kind, flops=flops, bytes_read=read, bytes_written=written, producer_bytes=producer,
                         precision=prec)
        assert costs.model_us(model, w) == pytest.approx(us, rel=1e-9), (model, kind, prec)


def test_matrix_products_run_at_the_rate_of_their_precision():
    assert costs.precision_of([torch.float32, torch.float32]) == costs.FP32
    assert costs.precision_of([torch.bfloat16, torch.float32]) == costs.HALF  # the narrowest operand
    assert costs.precision_of([torch.float16, torch.int64]) == costs.HALF
    assert costs.precision_of([torch.float8_e4m3fn, torch.bfloat16]) == costs.FP8
    assert costs.precision_of([torch.int64]) == costs.FP32
    mm = costs.OpWork(kind=costs.MATMUL, flops=989e12)
    assert costs.model_us("roofline:h100", dataclasses.replace(mm, precision=costs.HALF)) == pytest.approx(1e6)
    assert costs.model_us("roofline:h100", dataclasses.replace(mm, precision=costs.FP32)) == pytest.approx(2.002e6,
                                                                                                          rel=1e-3)
    # Element-wise work runs at one rate whatever the precision.
    pw = costs.OpWork(kind=costs.POINTWISE, flops=67e12)
    assert costs.model_us("roofline:h100", dataclasses.replace(pw, precision=costs.HALF)) == pytest.approx(1e6)


def test_roofline_and_fused():
    w = costs.OpWork(kind=costs.POINTWISE, flops=1e6, bytes_read=8e6, bytes_written=4e6, producer_bytes=8e6)
    mm, other, bw = costs.DEVICES["v100"][:3]
    assert costs.model_us("roofline:v100", w) == pytest.approx(max(1e6 / other, 12e6 / bw) * 1e6)
    # Fused: the read its producer hands over is free, and so is the write (the producer's epilogue).
    assert costs.model_us("fused:v100", w) == pytest.approx(1e6 / other * 1e6)
    m = costs.OpWork(kind=costs.MATMUL, flops=1e12, bytes_read=1e6, bytes_written=1e6)
    assert costs.model_us("fused:h200", m) == costs.model_us("roofline:h200", m) == pytest.approx(1e12 / 494e12 * 1e6)
    # PyTorch's partitioner's estimate: matrix FLOPs, and 1 for anything else.
    assert costs.model_us("flops", m) == 1e12 and costs.model_us("flops", w) == 1.0
    assert costs.unit("flops") == "flop" and costs.unit("roofline:v100") == "us"
    for bad in ("roofline:tpu", "magic", "measured:gpu", "flops:v100", "roofline:h100x"):
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
