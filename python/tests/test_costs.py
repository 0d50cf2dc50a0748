"""The Python cost models are the C++ ones: same device table, same formulas."""
import os
import re

import pytest

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
