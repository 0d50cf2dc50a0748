"""bench/torch/gpu.py, the CUDA figures of the GPU check, run on the CPU: its control flow (header, one line a row
as soon as it is known, a failing row that does not stop the others, the JSON, the exit status) is tested here; the
figures themselves need the device."""
import importlib
import json
import os
import re
import subprocess
import sys

import pytest
import torch

from memplan_torch import command

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
SCRIPT = os.path.join(ROOT, "bench", "torch", "gpu.py")
ROW = re.compile(r"^torch (\w+) (store-all|0\.5): predicted peak ([\d.]+) MiB, max_memory_allocated (n/a|[\d.]+ MiB), "
                 r"max_memory_reserved (n/a|[\d.]+ MiB), grads equal to unplanned: (yes|no) \(max rel diff ([\d.e+-]+)\), "
                 r"to store-all: (-|yes|no)(?: \(max rel diff ([\d.e+-]+)\))?, "
                 r"ms/step ([\d.]+), step peak ([\d.]+) MiB \(([+-][\d.]+) % vs predicted\), recomputed (\d+) ops, "
                 r"plan ([\d.]+) s$")


@pytest.fixture
def gpu(monkeypatch):
    monkeypatch.setenv("MEMPLAN", command.executable())
    monkeypatch.syspath_prepend(os.path.dirname(SCRIPT))
    return importlib.import_module("gpu")


def test_gpu_bench_rows_on_the_cpu(gpu, monkeypatch, tmp_path, capsys):
    def broken(batch, image):
        raise RuntimeError("no such\nmodel")
    monkeypatch.setitem(gpu.MODELS, "broken", broken)
    rc = gpu.main(["--device", "cpu", "--models", "broken,gpt2", "--repeats", "1", "--time-limit", "10",
                   "--out", str(tmp_path)])
    lines = capsys.readouterr().out.splitlines()
    assert rc == 1  # a row failed
    assert lines[0].startswith(f"torch-gpu: torch {torch.__version__}, ") and "device cpu" in lines[0]
    # The failing model's rows say why, on one line each, and the next model still runs.
    assert lines[1:3] == ["torch broken store-all: error: RuntimeError: the unplanned step failed: "
                          "RuntimeError: no such model",
                          "torch broken 0.5: error: RuntimeError: the unplanned step failed: "
                          "RuntimeError: no such model"]
    rows = [ROW.match(x) for x in lines[3:5]]
    assert all(rows), lines[3:5]
    assert [m.group(1, 2) for m in rows] == [("gpt2", "store-all"), ("gpt2", "0.5")]
    for m in rows:
        assert m.group(4) == m.group(5) == "n/a"  # torch.cuda's statistics: not on the CPU
        assert m.group(6) == "yes" and float(m.group(7)) <= 1e-5  # on the CPU eager runs the same kernels
        assert abs(float(m.group(12))) <= 5  # measured step peak within 5 % of the plan's
    assert rows[0].group(8) == "-" and rows[1].group(8) == "yes" and float(rows[1].group(9)) <= 1e-5
    assert int(rows[0].group(13)) == 0 < int(rows[1].group(13))  # the budget recomputes
    assert float(rows[1].group(11)) < float(rows[0].group(11))  # and lowers the measured peak
    assert lines[5].startswith("torch-gpu: done in ")
    result = json.loads((tmp_path / "torch_gpu.json").read_text())
    assert result["header"]["device"] == "cpu" and result["tolerance"] == gpu.TOLERANCE
    got = [(r["model"], r["budget"], "error" in r) for r in result["rows"]]
    assert got == [("broken", None, True), ("broken", 0.5, True), ("gpt2", None, False), ("gpt2", 0.5, False)]
    assert all(r["grads_equal"] and r["workspace"] == "measured:cpu" for r in result["rows"][2:])


@pytest.mark.skipif(torch.cuda.is_available(), reason="this machine has a CUDA device")
def test_gpu_bench_skips_without_a_cuda_device():
    p = subprocess.run([sys.executable, SCRIPT, "--models", "gpt2"], capture_output=True, text=True,
                       env=dict(os.environ, MEMPLAN=command.executable()))
    assert p.returncode == 77 and p.stdout == "skipped: no CUDA device\n", (p.returncode, p.stdout, p.stderr)
