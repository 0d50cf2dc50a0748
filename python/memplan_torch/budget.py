"""The one reader of a user's budget: what ``compile``, ``Partitioner`` and the command line take, turned
into the string ``memplan plan --budget`` reads. memplan resolves it against the store-all plan it makes
anyway (one process per plan); the forms and their meanings are memplan's (docs/remat.md, "Budgets"):

============================  ===========================================================================
given                         ``budget_on="peak"`` (the step's peak)  /  ``"saved"`` (what crosses to the
                              backward, as PyTorch's ``activation_memory_budget``)
============================  ===========================================================================
``None``                      no budget: store-all
``int`` B, ``"8GB"``,         peak: the arena holds at most B bytes / saved: at most B bytes saved for the
``"512MiB"``, ``"7.5GiB"``    backward, on top of what is live there whatever the plan keeps
``"P%"``                      peak: P % of store-all's arena / saved: P % of what store-all holds at the
                              boundary
``float`` f in [0, 1],        peak: f of the way from the smallest peak memplan reaches (0) to store-all's
``"fraction:F"``              arena (1), feasible at every f / saved: the resident bytes and f of what
                              store-all saves (PyTorch's meaning of activation_memory_budget = f)
``"saved:F"``, F in (0, 1]    f of what store-all saves for the backward: peak: store-all's arena less
                              the other (1 - F) of it / saved: as ``fraction:F``
============================  ===========================================================================

``on_infeasible``: "fail" (default): a peak budget no plan meets raises ``Infeasible`` (or ``NoPlan``),
naming the smallest peak memplan reached and what is live there; "smallest": that smallest plan is used,
with a warning.

A budget is checked here against memplan's grammar, so that a mistyped budget fails where it is given
(``Partitioner("8 GB")``), not inside a compile; the test suite checks that both accept the same strings.
"""
from __future__ import annotations

import dataclasses
import math
import numbers
import re

BUDGET_ON = ("peak", "saved")
ON_INFEASIBLE = ("fail", "smallest")

# memplan's grammar (remat/budget.hpp): bytes, a number with a unit, a percentage, or saved:F.
_NUMBER = r"([0-9]*\.?[0-9]+(?:[eE][+-]?[0-9]+)?)"
_BYTES = re.compile(r"([0-9]+)B?")
_SIZE = re.compile(_NUMBER + r"([KMGT]i?B)")
_PERCENT = re.compile(_NUMBER + "%")
_SAVED = re.compile("saved:" + _NUMBER)
_FRACTION = re.compile("fraction:" + _NUMBER)


@dataclasses.dataclass(frozen=True)
class Budget:
    """A budget as memplan reads it: ``arg`` for ``--budget`` (None: no budget) and what it bounds."""
    arg: str | None
    on: str = "peak"
    on_infeasible: str = "fail"

    def args(self) -> list[str]:
        """The options of ``memplan plan`` that say it."""
        if self.arg is None:
            return []
        return (["--budget", self.arg] + (["--budget-on", self.on] if self.on != "peak" else [])
                + (["--on-infeasible", self.on_infeasible] if self.on_infeasible != "fail" else []))


def _fraction(prefix: str, f: float, given, zero: bool) -> str:
    if not (0 <= f <= 1 if zero else 0 < f <= 1):
        what = ("of the way from the smallest peak to store-all's" if prefix == "fraction"
                else "of what store-all saves for the backward")
        raise ValueError(f"budget {given!r}: a fraction must be in {'[0, 1]' if zero else '(0, 1]'} ({what})")
    return f"{prefix}:{f + 0.0!r}"  # + 0.0: -0.0 is 0.0


def read(budget, budget_on: str = "peak", on_infeasible: str = "fail") -> Budget:
    """`budget` as given by a user (None, bytes, a fraction or a string of memplan's forms, see the table
    above), what it bounds and what a budget no plan meets does, checked; raises ValueError naming the
    value."""
    if budget_on not in BUDGET_ON:
        raise ValueError(f"budget_on '{budget_on}': expected 'peak' or 'saved'")
    if on_infeasible not in ON_INFEASIBLE:
        raise ValueError(f"on_infeasible '{on_infeasible}': expected 'fail' or 'smallest'")
    if on_infeasible == "smallest" and budget_on == "saved":
        raise ValueError("on_infeasible 'smallest' is for peak budgets (the smallest plan is the smallest peak), "
                         "not with budget_on='saved'")
    if budget is None:
        return Budget(None, budget_on, on_infeasible)
    if isinstance(budget, bool):
        raise ValueError(f"budget {budget!r}: expected a fraction (0.5), bytes (int) or a string ('2GB', '40%')")
    if isinstance(budget, numbers.Integral):
        if budget <= 0:
            raise ValueError(f"budget {budget}: bytes must be positive (the smallest peak memplan reaches is the "
                             "fraction 0.0)")
        return Budget(str(int(budget)), budget_on, on_infeasible)
    if isinstance(budget, numbers.Real):
        if math.isnan(budget):
            raise ValueError(f"budget {budget!r}: not a number")
        return Budget(_fraction("fraction", float(budget), budget, True), budget_on, on_infeasible)
    if isinstance(budget, str):
        s = budget.strip()
        for prefix, pattern, zero in (("saved", _SAVED, False), ("fraction", _FRACTION, True)):
            m = pattern.fullmatch(s)
            if m:
                return Budget(_fraction(prefix, float(m.group(1)), budget, zero), budget_on, on_infeasible)
        number = next((m.group(1) for m in (r.fullmatch(s) for r in (_BYTES, _SIZE)) if m), None)
        if number is not None and float(number) > 0 and len(s) <= 40:
            return Budget(s, budget_on, on_infeasible)
        percent = _PERCENT.fullmatch(s)
        if percent and 0 < float(percent.group(1)) <= 1e6:
            return Budget(s, budget_on, on_infeasible)
    raise ValueError(f"budget {budget!r}: expected a fraction (0.5), bytes (int) or a string memplan reads: a size "
                     "('2GB', '512MiB'), a percentage ('40%'), 'fraction:F' or 'saved:F'")


_UNIT_BYTES = {"B": 1, "KiB": 2**10, "MiB": 2**20, "GiB": 2**30, "TiB": 2**40,
               "KB": 10**3, "MB": 10**6, "GB": 10**9, "TB": 10**12}


def resolved(b: Budget, store_all: int, smallest: int) -> int:
    """`b` (a peak budget) in bytes against a peak of store-all `store_all` and a smallest reachable peak
    `smallest`, as memplan resolves it for one graph (remat/budget.hpp), for a budget that bounds something
    memplan does not plan in one piece (a step of several compiled regions)."""
    s = b.arg
    m = _FRACTION.fullmatch(s)
    if m:
        return int(smallest + float(m.group(1)) * (store_all - smallest))
    if _SAVED.fullmatch(s):
        raise ValueError(f"budget {s!r}: saved:F bounds what one graph saves for its backward, not a step's peak")
    m = _PERCENT.fullmatch(s)
    if m:
        return int(store_all * float(m.group(1)) / 100)
    m = _SIZE.fullmatch(s)
    if m:
        return int(float(m.group(1)) * _UNIT_BYTES[m.group(2)])
    return int(_BYTES.fullmatch(s).group(1))
