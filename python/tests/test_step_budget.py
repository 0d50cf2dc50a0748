"""A budget for the whole step across compiled regions (``Partitioner.fit``): a model compiled block by block
and a model with graph breaks, at three budgets: the step's measured peak at or below the budget, gradients
equal to eager's; and the division itself (``regions.divide``) on regions made by hand."""
import copy

import pytest
import torch
import torch._dynamo
import torch._inductor.config as inductor_config
import torch.nn as nn

import memplan_torch as mt
from memplan_torch import budget, command, regions
from memplan_torch.probe import measure_step, storage_bytes


@pytest.fixture(autouse=True)
def _inductor_restored():
    name = "fusion_memory_timeline_peak_memory_increase_gb"
    before = getattr(inductor_config, name), inductor_config.custom_partitioner_fn, inductor_config.allow_buffer_reuse
    yield
    setattr(inductor_config, name, before[0])
    inductor_config.custom_partitioner_fn = before[1]
    inductor_config.allow_buffer_reuse = before[2]
    torch._dynamo.reset()


class _Block(nn.Module):
    def __init__(self, h=64):
        super().__init__()
        self.up, self.down = nn.Linear(h, 4 * h), nn.Linear(4 * h, h)

    def forward(self, x):
        return x + self.down(torch.relu(self.up(x)).sin())


class _Blocks(nn.Module):
    """Four blocks, each compiled on its own (``block.compile()``), and a head run eagerly."""

    def __init__(self, h=64):
        super().__init__()
        torch.manual_seed(0)
        self.blocks = nn.ModuleList([_Block(h) for _ in range(4)])
        self.head = nn.Linear(h, 500)

    def forward(self, x):
        for b in self.blocks:
            x = b(x)
        return self.head(x)


class _Broken(nn.Module):
    """Three stages with graph breaks between them, the whole step compiled."""

    def __init__(self, h=64):
        super().__init__()
        torch.manual_seed(0)
        self.a = nn.Sequential(nn.Linear(h, 4 * h), nn.GELU(), nn.Linear(4 * h, h))
        self.b = nn.Sequential(nn.Linear(h, 4 * h), nn.Tanh(), nn.Linear(4 * h, 2 * h), nn.SiLU())
        self.head = nn.Linear(2 * h, 500)

    def forward(self, x):
        x = x + self.a(x)
        torch._dynamo.graph_break()
        x = self.b(x.sin())
        torch._dynamo.graph_break()
        return self.head(x)


def _loss(model, x, y):
    return nn.functional.cross_entropy(model(x), y)


_compiled_loss = torch.compile(_loss)


def _setup(kind):
    model = _Blocks() if kind == "blocks" else _Broken()
    g = torch.Generator().manual_seed(1)
    x, y = torch.randn(128, 64, generator=g), torch.randint(0, 500, (128,), generator=g)
    if kind == "blocks":
        for b in model.blocks:
            b.compile()
        return model, _loss, (x, y)
    return model, _compiled_loss, (x, y)


def _measured(model, loss_fn, args):
    resident = storage_bytes(list(model.parameters()) + list(model.buffers()) + list(args))
    model.zero_grad(set_to_none=True)
    loss_fn(model, *args).backward()  # compiles, if anything is left to compile
    model.zero_grad(set_to_none=True)
    return measure_step(lambda: loss_fn(model, *args).backward(), resident).peak


@pytest.mark.parametrize("kind", ["blocks", "breaks"])
def test_a_step_budget_bounds_the_measured_peak_across_regions(kind):
    """At three budgets (store-all, a fraction, bytes between the smallest and store-all): the step's peak,
    measured after fit in a fresh measurement, at or below the budget; gradients equal to eager's."""
    model, loss_fn, args = _setup(kind)
    ref = copy.deepcopy(model)
    _loss(ref, *args).backward()
    plans = []
    for given in (1.0, 0.3, None):
        if given is None:  # bytes a third of the way from the smallest to store-all
            low, top = plans[-1].smallest, plans[-1].store_all
            given = int(low + (top - low) / 3)
        part = mt.Partitioner(given, time_limit=2)
        inductor_config.custom_partitioner_fn = part
        plan = part.fit(model, loss_fn, *args)
        plans.append(plan)
        assert len(plan.runs) >= 3 and len(plan.chosen) >= 2, plan.runs
        assert plan.smallest <= plan.budget <= plan.store_all and plan.measured <= plan.budget
        peak = _measured(model, loss_fn, args)
        assert peak <= plan.budget, (given, peak, plan)
        for a, b in zip(model.parameters(), ref.parameters()):
            assert ((a.grad - b.grad).abs().max() / b.grad.abs().max()).item() < 1e-4
        assert len(part.partitions) == len(plan.chosen)  # every region compiled with its chosen plan
    assert plans[0].budget == plans[0].store_all and all(c["budget"] == "store-all" for c in plans[0].chosen)
    assert plans[1].smallest < plans[1].store_all, "nothing below store-all: the budgets would not be tested"
    assert any(c["budget"] != "store-all" for c in plans[1].chosen)


def test_a_step_budget_below_the_smallest_is_named_or_trained_at_the_smallest():
    model, loss_fn, args = _setup("breaks")
    inductor_config.custom_partitioner_fn = part = mt.Partitioner(10_000, time_limit=2)
    with pytest.raises(command.Infeasible, match=r"step budget of 10000 bytes: the smallest step peak .* measured"):
        part.fit(model, loss_fn, *args)
    inductor_config.custom_partitioner_fn = part = mt.Partitioner(10_000, time_limit=2, on_infeasible="smallest")
    with pytest.warns(RuntimeWarning, match="training at the smallest"):
        plan = part.fit(model, loss_fn, *args)
    assert not plan.fits and plan.measured == plan.smallest < plan.store_all
    assert _measured(model, loss_fn, args) <= plan.smallest


def test_fit_counts_the_tensors_it_is_given_in_tuples():
    """A step that takes its inputs and targets as tuples: what the step starts with counts them, so the
    smallest measured step peak (f = 0's budget) is what a later step measures."""
    model, _, (x, y) = _setup("breaks")
    loss_fn = (lambda m, inputs, targets: _compiled_loss(m, *inputs, *targets))
    args = ((x,), (y,))
    inductor_config.custom_partitioner_fn = part = mt.Partitioner(0.0, time_limit=2)
    plan = part.fit(model, loss_fn, *args)
    assert plan.resident == storage_bytes(list(model.parameters()) + list(model.buffers()) + [x, y])
    model.zero_grad(set_to_none=True)
    loss_fn(model, *args).backward()
    model.zero_grad(set_to_none=True)
    peak = measure_step(lambda: loss_fn(model, *args).backward(), plan.resident).peak
    assert peak <= plan.budget == plan.smallest, (peak, plan)


def test_fit_needs_a_peak_budget():
    model, loss_fn, args = _setup("breaks")
    for part in (mt.Partitioner(None), mt.Partitioner(0.5, budget_on="saved")):
        with pytest.raises(ValueError, match="fit: the step's budget bounds its peak"):
            part.fit(model, loss_fn, *args)


# The division on regions made by hand: two regions, the second run three times.

def _region(name, cands, inputs=10, grads=5):
    r = regions.Region(key=name, name=name, inputs=inputs, grads=grads)
    r.candidates = [regions.Candidate(budget=b, budget_on="peak", plan={}, report={}, peak=p, saved=s, extra=e)
                    for b, p, s, e in cands]
    return r


def _two():
    a = _region("a", [("store-all", 100, 50, 0.0), ("fraction:0.5", 80, 20, 1.0), ("fraction:0.0", 60, 0, 5.0)])
    b = _region("b", [("store-all", 100, 40, 0.0), ("fraction:0.5", 90, 10, 2.0)])
    return [a, b], [0, 1, 1, 1]


def test_the_step_model_counts_earlier_runs_and_later_gradients():
    regs, runs = _two()
    # Run 4 (b) holds a's 50 + 10 and two b's (40 + 10) each: 160, plus its own 100.
    during, between = regions.moments(regs, runs, [0, 0])
    assert during == max(100 + 3 * 5, 60 + 100 + 2 * 5, 60 + 50 + 100 + 5, 60 + 100 + 100) == 260
    assert between == 60 + 3 * 50
    assert regions.step_peak(regs, runs, [0, 0], (7, 100)) == max(267, 310)


def test_divide_measures_what_it_chooses_and_keeps_the_budget():
    regs, runs = _two()
    resident = 1000
    truth = {(0, 0): 1300, (0, 1): 1240, (1, 0): 1270, (1, 1): 1215, (2, 0): 1250, (2, 1): 1190}
    asked = []

    def measure(choice):
        asked.append(tuple(choice))
        return truth[tuple(choice)]

    choice, plan = regions.divide(regs, runs, resident, budget.read(1245), measure, truth[(0, 0)])
    assert plan.measured == truth[tuple(choice)] <= 1245 and plan.budget == 1245
    assert all(truth[a] for a in asked) and tuple(choice) in asked
    # Every choice that fits costs at least the one chosen (the model may be conservative, never the result).
    assert plan.smallest == 1190
    choice, plan = regions.divide(regs, runs, resident, budget.read(1.0), measure, truth[(0, 0)])
    assert choice == [0, 0] and plan.budget == 1300
    with pytest.raises(command.Infeasible, match="smallest step peak .* is 1190 bytes"):
        regions.divide(regs, runs, resident, budget.read(1100), measure, truth[(0, 0)])
    choice, plan = regions.divide(regs, runs, resident, budget.read(0.0), measure, truth[(0, 0)])
    assert plan.measured == 1190 == plan.budget
