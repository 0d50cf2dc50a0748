"""Budgets: read once in Python (memplan_torch.budget), passed as given to memplan, which resolves them against
the store-all plan it makes anyway: one memplan process per plan, and the same number means the same thing
whether memplan_torch or the command resolves it."""
import copy
import json
import subprocess

import pytest

import memplan_torch as mt
from memplan_torch import budget, command

import models

# Accepted and refused by both readers (memplan's grammar is remat/budget.hpp's).
GOOD = ["1", "4096", "100B", "2GB", "7.5GiB", "512MiB", "0.5KB", "1e3MB", "40%", "0.5%", "100%", "250%", "saved:0.5",
        "saved:1", "saved:1e-3", " 8GB ", "fraction:0", "fraction:0.5", "fraction:1", "fraction:1e-3"]
BAD = ["0", "-5", "+5", "8 GB", "1.5B", "1e9", "GB", "%", "0%", "5TB%", "saved:", "saved:0", "saved:1.5", "saved:-1",
       "save:0.5", "50 %", "abc", "1e7%", "", "-1GB", "saved:nan", "fraction:", "fraction:1.5", "fraction:-0.5",
       "fraction:nan", "fraction:+0.5", "fraction:0.5GB"]


def _graph():
    k = 256
    tensors = [("x", k, True), ("t1", 100 * k, False), ("t2", 100 * k, False), ("loss", k, False), ("gx", k, False)]
    ops = [("f1", ["x"], ["t1"], "forward"), ("f2", ["t1"], ["t2"], "forward"), ("fl", ["t2"], ["loss"], "forward"),
           ("b", ["loss", "t1", "t2"], ["gx"], "backward")]
    return {"format": "memplan.graph", "version": 1, "name": "toy", "outputs": ["loss"],
            "tensors": [dict(name=n, bytes=b, **({"persistent": True} if p else {})) for n, b, p in tensors],
            "ops": [dict(name=n, inputs=i, outputs=o, phase=ph, cost=1.0) for n, i, o, ph in ops]}


@pytest.mark.parametrize("text", GOOD + BAD)
def test_python_and_memplan_accept_the_same_budgets(text, tmp_path):
    path = tmp_path / "g.json"
    path.write_text(json.dumps(_graph()))
    p = subprocess.run([command.executable(), "plan", str(path), "--budget", text.strip(), "--time-limit", "1"],
                       capture_output=True, text=True)
    memplan_reads = "option --budget" not in p.stderr
    try:
        budget.read(text)
        python_reads = True
    except ValueError:
        python_reads = False
    assert python_reads == memplan_reads == (text in GOOD), (text, p.returncode, p.stderr)


def test_a_fraction_is_fraction_F_and_options_are_named():
    assert budget.read(0.5) == budget.Budget("fraction:0.5", "peak")
    assert budget.read(0.0).arg == budget.read(-0.0).arg == "fraction:0.0"
    assert budget.read(0.5, "saved").args() == ["--budget", "fraction:0.5", "--budget-on", "saved"]
    assert budget.read("saved:0.5").args() == ["--budget", "saved:0.5"]
    assert budget.read(3 << 30).args() == ["--budget", str(3 << 30)]
    assert budget.read(None, "saved").args() == []
    assert budget.read("2GB", on_infeasible="smallest").args() == ["--budget", "2GB", "--on-infeasible", "smallest"]
    for bad, match in [(1.5, r"budget 1.5: a fraction must be in \[0, 1\]"), (-0.1, r"must be in \[0, 1\]"),
                       (float("nan"), "not a number"), (0, "bytes must be positive"), (-5, "bytes must be positive"),
                       (True, "expected a fraction"), ("8 GB", "a string memplan reads"),
                       ("abc", "a string memplan reads"), ("-1GB", "a string memplan reads"),
                       ("saved:0", r"must be in \(0, 1\]")]:
        with pytest.raises(ValueError, match=match):
            budget.read(bad)
    with pytest.raises(ValueError, match="budget_on 'both'"):
        budget.read(0.5, "both")
    with pytest.raises(ValueError, match="on_infeasible 'retry'"):
        budget.read(0.5, on_infeasible="retry")
    with pytest.raises(ValueError, match="on_infeasible 'smallest' is for peak budgets"):
        budget.read(0.5, "saved", "smallest")


@pytest.mark.parametrize("given,budget_on", [(0.5, "peak"), (0.5, "saved"), ("80%", "peak"), ("60%", "saved")])
def test_compile_plans_in_one_process_and_means_what_the_command_means(given, budget_on, memplan_calls):
    model, inputs, targets, loss_fn = models.tiny_gpt2(dropout=0.0)
    cm = mt.compile(copy.deepcopy(model), given, inputs, targets=targets, loss_fn=loss_fn, workspace="none",
                    time_limit=4 if isinstance(given, float) and budget_on == "peak" else 2, budget_on=budget_on)
    assert memplan_calls == ["plan"]
    assert cm.budget_bytes == cm.report["budget"]
    if budget_on == "peak" and isinstance(given, float):
        # f of the way from the smallest peak memplan found (a timed search: it may differ between runs) to
        # store-all's arena.
        floor, top = cm.report["floor"], cm.report["store_all"]
        assert floor < top, "no plan below store-all: the fraction would not be tested"
        assert abs(cm.budget_bytes - (floor + given * (top - floor))) <= 1
        assert cm.report["arena"] <= cm.budget_bytes
    else:
        # The number the command resolves for the exported graph is the one compile planned for.
        _, report = command.plan(cm.graph, budget.read(given, budget_on), time_limit=2)
        assert report["budget"] == cm.budget_bytes
    if budget_on == "saved":
        assert cm.schedule.saved_bytes == cm.report["kept"] <= cm.budget_bytes - cm.report["resident"]
    assert command.check(cm.graph, cm.plan, budget_on)[0]
