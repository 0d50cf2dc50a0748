"""A budget for the whole step when the step is several compiled regions: what each region's plan costs the
step, and the plans, one per region, that together fit the step's budget at the least recomputation.

A step compiled with graph breaks, or a model whose blocks are compiled one by one (Dynamo compiles a block
once and runs that code for every layer), runs its regions' forwards one after the other and their
backwards in the reverse order. While region run i computes, the step holds what the earlier runs keep for
their backwards (the tensors their forwards save and the inputs their backwards read), the gradients the
later runs' backwards have already made, and what runs outside every region (the loss computed eagerly,
the embedding between two breaks). memplan's plan of a region bounds the region's own peak; the step's peak
is, for every choice of one plan per region (the code of a region is one, so every run of it has the same
plan),

    resident + max( outside_1 + max over runs i of [ sum over runs j before i of (saved_j + inputs_j)
                                      + (peak_i - weights_i) + sum over runs j after i of grads_j ],
                    outside_2 + sum over every run j of (saved_j + inputs_j) )

the first term the moments a region runs, the second the moment between the forward and the backward (a
loss computed outside the regions holds everything the regions keep). ``resident`` is what the step starts
with (the weights, the inputs); ``outside_1`` and ``outside_2`` what runs outside the regions at those
moments, each calibrated on a measured run of the store-all plans (``Partitioner.fit``) as if that run
peaked at its moment, and never below 0 (the model counts a region's returned values and input gradients
to the region's end, more than the step holds): each term then bounds its own moment for another choice
too. Where the budget is at or above the measured store-all peak, store-all is the plan. The choice that fits the
budget at the least recomputation (each run of a region costs its plan's extra time) is exact over every
combination of the candidates where they are few, and otherwise greedy (the move that lowers the peak most
per unit of extra time, until it fits).
"""
from __future__ import annotations

import dataclasses
import hashlib
import itertools
import json
import warnings
from typing import Callable, Sequence

from . import command
from .budget import Budget, read, resolved
from .graph.lower import Mapping
from .graph.schedule import schedule_of
from .step.joint import Joint

EXACT = 4096  # combinations searched exactly; above, the greedy choice
FRACTIONS = (0.75, 0.5, 0.25, 0.0)  # the peak budgets each region is planned at, beside store-all
SAVED = (0.5, 0.0)                  # the saved-bytes budgets (PyTorch's fraction of what store-all saves)


@dataclasses.dataclass
class Candidate:
    """One plan of a region, as the step sees it."""
    budget: str             # the budget it was planned under (memplan's grammar), "store-all" for none
    budget_on: str
    plan: dict
    report: dict
    peak: int               # the region's live peak with the plan, less its weights (resident for the step)
    saved: int              # what its forward keeps for its backward beyond its inputs
    extra: float            # the plan's time above the region's fastest (memplan's cost model)


@dataclasses.dataclass
class Region:
    """One compiled region's code: its runs in the step and the plans to choose from."""
    key: str                # the digest of its joint graph (a recompile of the same code has the same key)
    name: str               # how messages name it: "region 2 (18 ops)"
    inputs: int             # bytes of the non-weight inputs its backward reads (held across the step)
    grads: int              # bytes of its weights' gradients (held from its backward to the step's end)
    weights: int = 0        # bytes of its weights and buffers (resident: not counted in a candidate's peak)
    candidates: list = dataclasses.field(default_factory=list)


def moments(regions: Sequence[Region], runs: Sequence[int], choice: Sequence[int]) -> tuple[int, int]:
    """For `choice` (a candidate index per region), when the regions run in the forward order `runs`
    (indices into `regions`): the largest of what the step holds (beyond the resident bytes and what runs
    outside the regions) while a region runs, and what it holds between the forward and the backward (every
    run's saved tensors and inputs: the moment of a loss computed outside the regions)."""
    c = [regions[k].candidates[choice[k]] for k in range(len(regions))]
    held = [c[k].saved + regions[k].inputs for k in runs]
    grads = [regions[k].grads for k in runs]
    before, after = 0, sum(grads)
    peak = 0
    for i, k in enumerate(runs):
        after -= grads[i]
        peak = max(peak, before + c[k].peak + after)
        before += held[i]
    return peak, before


def step_peak(regions: Sequence[Region], runs: Sequence[int], choice: Sequence[int],
              outside: tuple[int, int] = (0, 0)) -> int:
    """The step's peak beyond the resident bytes for `choice`: the larger of the two ``moments``, each with its
    own part of what runs outside the regions (`outside`: while a region runs, between the halves)."""
    during, between = moments(regions, runs, choice)
    return max(during + outside[0], between + outside[1])


def step_extra(regions: Sequence[Region], runs: Sequence[int], choice: Sequence[int]) -> float:
    """The step's recomputation time: each run's plan's extra time."""
    return sum(regions[k].candidates[choice[k]].extra for k in runs)


def choose(regions: Sequence[Region], runs: Sequence[int], limit: float, outside=(0, 0)) -> list[int] | None:
    """The candidate per region whose step peak (``step_peak``) is at most `limit` at the least step time
    (ties: the lower peak), or None where no combination fits."""
    return _search(regions, runs, limit, outside,
                   lambda ch: (step_extra(regions, runs, ch), step_peak(regions, runs, ch, outside)))


def smallest(regions: Sequence[Region], runs: Sequence[int], outside=(0, 0)) -> list[int]:
    """The candidates whose step peak is the smallest found (ties: the least time)."""
    return _search(regions, runs, None, outside,
                   lambda ch: (step_peak(regions, runs, ch, outside), step_extra(regions, runs, ch)))


def _search(regions, runs, limit, outside, key):
    sizes = [len(r.candidates) for r in regions]
    total = 1
    for s in sizes:
        total *= s
    if total <= EXACT:
        every = (list(ch) for ch in itertools.product(*(range(s) for s in sizes)))
        fits = [ch for ch in every if limit is None or step_peak(regions, runs, ch, outside) <= limit]
        return min(fits, key=key) if fits else None
    return _greedy(regions, runs, limit, outside)


def _greedy(regions, runs, limit, outside) -> list[int] | None:
    # From the fastest candidate of each region: while over the limit (None: while any move lowers the peak),
    # the move (one region to another of its candidates) that lowers the step's peak most per unit of extra
    # time.
    choice = [min(range(len(r.candidates)), key=lambda c, r=r: (r.candidates[c].extra, r.candidates[c].peak))
              for r in regions]
    while limit is None or step_peak(regions, runs, choice, outside) > limit:
        now_peak, now_time = step_peak(regions, runs, choice, outside), step_extra(regions, runs, choice)
        best, best_rate = None, None
        for k, r in enumerate(regions):
            for c in range(len(r.candidates)):
                trial = choice[:k] + [c] + choice[k + 1:]
                drop = now_peak - step_peak(regions, runs, trial, outside)
                if drop <= 0:
                    continue
                rate = drop / max(step_extra(regions, runs, trial) - now_time, 1e-12)
                if best_rate is None or rate > best_rate:
                    best, best_rate = trial, rate
        if best is None:
            return choice if limit is None else None
        choice = best
    return choice


@dataclasses.dataclass
class Record:
    """A region as ``Partitioner.fit``'s first compile saw it."""
    key: str
    joint: Joint
    graph: dict
    mapping: Mapping
    weights: set            # names of its inputs that are the model's weights and buffers (resident)
    grads: set              # names of the nodes that make their gradients


def _tensor_bytes(graph: dict, mapping: Mapping, nodes) -> int:
    tbytes = {t["name"]: t["bytes"] for t in graph["tensors"]}
    return sum(tbytes.get(t, 0) for n in nodes for t in mapping.tensor_of.get(n, ()))


def region_of(record: Record, number: int, remat: str, time_limit: float | None,
              fractions: Sequence[float] = FRACTIONS, saved: Sequence[float] = SAVED) -> Region:
    """`record`'s region with its candidate plans: store-all; the peak budgets `fractions` of the way from
    the smallest peak memplan reaches to store-all; the saved-bytes budgets `saved` (PyTorch's meaning:
    the resident bytes and that fraction of what store-all saves). A budget memplan cannot meet is left
    out."""
    graph, mapping, joint = record.graph, record.mapping, record.joint
    inputs = [n for n in joint.inputs if n not in record.weights]
    region = Region(key=record.key, name=f"region {number} ({len(graph['ops'])} ops)",
                    inputs=_tensor_bytes(graph, mapping, inputs), grads=_tensor_bytes(graph, mapping, record.grads),
                    weights=_tensor_bytes(graph, mapping, record.weights))
    tries = [(None, "peak")] + [(f"fraction:{f!r}", "peak") for f in fractions] + \
            [(f"fraction:{f!r}", "saved") for f in saved]
    for arg, on in tries:
        candidate_at(record, region, arg, on, remat, time_limit)
    return region


def candidate_at(record: Record, region: Region, arg: str | None, on: str, remat: str,
                 time_limit: float | None) -> Candidate | None:
    """The plan of `record`'s graph under the budget `arg` (None: store-all) on `on`, added to `region`'s
    candidates; None where memplan finds none."""
    try:
        plan, report = command.plan(record.graph, read(arg, on), remat=remat, time_limit=time_limit)
    except (command.Infeasible, command.NoPlan):
        return None
    sched = schedule_of(record.graph, record.mapping, plan, record.joint)
    fastest = report.get("fastest_cost", report.get("cost", 0.0))
    region.candidates.append(Candidate(
        budget=arg or "store-all", budget_on=on, plan=plan, report=report, peak=sched.live_peak - region.weights,
        saved=sched.saved_bytes, extra=max(0.0, float(report.get("cost", fastest)) - float(fastest))))
    return region.candidates[-1]


@dataclasses.dataclass
class StepPlan:
    """What ``Partitioner.fit`` decided for a step of several compiled regions (bytes)."""
    budget: int             # the step's budget, resolved
    store_all: int          # the step's measured peak with every region's store-all plan
    smallest: int           # the measured peak of the smallest choice (store-all's where that was not needed)
    measured: int           # the step's measured peak with the chosen plans
    predicted: int          # the step's peak with the chosen plans, as the model counts it
    resident: int           # what the step starts with (weights, buffers, inputs)
    outside: tuple          # what the step's model leaves out while a region runs and between the halves
    runs: list              # the regions' names in the order the forward runs them
    chosen: list            # per region: its name, number of runs, the budget of its plan, peak, saved, extra
    fits: bool = True       # False where no choice fits and on_infeasible="smallest" took the smallest
    compiles: int = 1       # the choices compiled and measured, store-all's included


def divide(regions: Sequence[Region], runs: Sequence[int], resident: int, wanted: Budget,
           measure: Callable[[list], int], store_all: int, rounds: int = 3,
           plan_at: Callable[[int, int], Candidate | None] | None = None) -> tuple[list[int], StepPlan]:
    """The plan per region for the step's budget `wanted` (a peak budget: bytes, a size, a percentage of the
    store-all peak, or a fraction of the way from the smallest step peak to it). `store_all` is the step's
    measured peak with every region's first candidate (store-all); `measure(choice)` compiles the step with
    `choice` and returns its measured peak. The step's model (``step_peak``, calibrated on every
    measurement so far) proposes the cheapest choice under the budget; the choice is measured, and the
    model's limit is lowered by its excess or raised by its slack (at most `rounds` proposals); the
    cheapest measured choice at or below the budget is taken (the smallest choice, measured, at worst). A step of one region run once is planned at the budget itself too:
    `plan_at(region, bytes)` adds the candidate memplan plans for the region's peak at `bytes` (what the
    budget leaves it), so the choice is not only among the fixed candidates. Raises ``Infeasible`` when
    the budget is below the smallest measured peak and `wanted` fails there."""
    every = [0] * len(regions)
    measured = {tuple(every): store_all}

    def outside():
        # Each moment's part of what runs outside the regions, as if each measured run peaked there (never
        # below 0): each term then bounds its own moment for another choice too.
        parts = [[peak - resident - m for m in moments(regions, runs, list(ch))] for ch, peak in measured.items()]
        return tuple(max([0] + [p[i] for p in parts]) for i in range(2))

    def peak_of(ch):
        if tuple(ch) not in measured:
            measured[tuple(ch)] = measure(ch)
        return measured[tuple(ch)]

    low = smallest(regions, runs, outside())
    low_bytes = store_all
    if resolved(wanted, store_all, 0) < store_all:  # below store-all (a fraction under 1 is): measure the smallest
        low_bytes = min(peak_of(low), store_all)
    budget = resolved(wanted, store_all, low_bytes)
    fits = True
    if budget >= store_all:
        choice = every  # store-all was measured: where it fits, it is the plan
    elif budget < low_bytes:
        message = (f"a step budget of {budget} bytes: the smallest step peak memplan's plans of the step's "
                   f"{len(regions)} compiled region(s) reach is {low_bytes} bytes, measured (store-all: "
                   f"{store_all})")
        if wanted.on_infeasible != "smallest":
            raise command.Infeasible(message)
        warnings.warn(message + "; training at the smallest", RuntimeWarning, stacklevel=3)
        choice, fits = low, False
    else:
        # Propose by the model; measure; a choice over the budget lowers the limit by its excess, one under
        # it raises the limit by its slack (a cheaper choice may fit too). The cheapest measured fit wins.
        limit = budget - resident
        for _ in range(rounds):
            if plan_at is not None and len(runs) == 1 and limit - outside()[0] > 0:
                plan_at(0, limit - outside()[0] + regions[0].weights)
            proposed = choose(regions, runs, limit, outside())
            if proposed is None or (tuple(proposed) in measured and proposed != every):
                break
            limit += budget - peak_of(proposed)
        fitting = [list(ch) for ch, peak in measured.items() if peak <= budget]
        choice = min(fitting, key=lambda ch: (step_extra(regions, runs, ch), measured[tuple(ch)])) if fitting else low
    chosen = []
    for k, r in enumerate(regions):
        c = r.candidates[choice[k]]
        chosen.append({"region": r.name, "runs": sum(1 for i in runs if i == k), "budget": c.budget,
                       "budget_on": c.budget_on, "peak": c.peak, "saved": c.saved, "extra": c.extra})
    return choice, StepPlan(budget=budget, store_all=store_all, smallest=low_bytes, measured=peak_of(choice),
                            predicted=resident + step_peak(regions, runs, choice, outside()), resident=resident,
                            outside=outside(), runs=[regions[k].name for k in runs], chosen=chosen, fits=fits,
                            compiles=len(measured))



def regions_of(records: Sequence[Record], remat: str, time_limit: float | None) -> list[Region]:
    """``region_of`` of each record; records of the same graph (the blocks of a model compiled one by one,
    each its own region) share their candidates' plans."""
    out, done = [], {}
    for i, rec in enumerate(records):
        digest = hashlib.sha256(json.dumps(rec.graph, sort_keys=True).encode()).hexdigest()
        if digest in done:
            twin = done[digest]
            out.append(dataclasses.replace(twin, key=rec.key, name=f"region {i + 1} ({len(rec.graph['ops'])} ops)"))
        else:
            out.append(region_of(rec, i + 1, remat, time_limit))
            done[digest] = out[-1]
    return out
