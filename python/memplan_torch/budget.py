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
``float`` f in (0, 1],        f of what store-all saves for the backward: peak: store-all's arena less the
``"saved:F"``                 other (1 - f) of it / saved: the resident bytes and f of what store-all saves
============================  ===========================================================================

A string is checked here against memplan's grammar, so that a mistyped budget fails where it is given
(``Partitioner("8 GB")``), not inside a compile; the test suite checks that both accept the same strings.
"""
from __future__ import annotations

import dataclasses
import numbers
import re

BUDGET_ON = ("peak", "saved")

# memplan's grammar (remat/budget.hpp): bytes, a number with a unit, a percentage, or saved:F.
_NUMBER = r"([0-9]*\.?[0-9]+(?:[eE][+-]?[0-9]+)?)"
_BYTES = re.compile(r"([0-9]+)B?")
_SIZE = re.compile(_NUMBER + r"([KMGT]i?B)")
_PERCENT = re.compile(_NUMBER + "%")
_SAVED = re.compile("saved:" + _NUMBER)


@dataclasses.dataclass(frozen=True)
class Budget:
    """A budget as memplan reads it: ``arg`` for ``--budget`` (None: no budget) and what it bounds."""
    arg: str | None
    on: str = "peak"

    def args(self) -> list[str]:
        """The options of ``memplan plan`` that say it."""
        if self.arg is None:
            return []
        return ["--budget", self.arg] + (["--budget-on", self.on] if self.on != "peak" else [])


def _fraction(f: float, given) -> str:
    if not 0 < f <= 1:
        raise ValueError(f"budget {given!r}: a fraction must be in (0, 1] (of what store-all saves for the backward)")
    return f"saved:{f!r}"


def read(budget, budget_on: str = "peak") -> Budget:
    """`budget` as given by a user (None, bytes, a fraction or a string of memplan's forms, see the table
    above) and what it bounds, checked; raises ValueError naming the value."""
    if budget_on not in BUDGET_ON:
        raise ValueError(f"budget_on '{budget_on}': expected 'peak' or 'saved'")
    if budget is None:
        return Budget(None, budget_on)
    if isinstance(budget, bool):
        raise ValueError(f"budget {budget!r}: expected a fraction (0.5), bytes (int) or a string ('2GB', '40%')")
    if isinstance(budget, numbers.Integral):
        if budget <= 0:
            raise ValueError(f"budget {budget}: bytes must be positive")
        return Budget(str(int(budget)), budget_on)
    if isinstance(budget, numbers.Real):
        return Budget(_fraction(float(budget), budget), budget_on)
    if isinstance(budget, str):
        s = budget.strip()
        saved = _SAVED.fullmatch(s)
        if saved:
            return Budget(_fraction(float(saved.group(1)), budget), budget_on)
        number = next((m.group(1) for m in (r.fullmatch(s) for r in (_BYTES, _SIZE)) if m), None)
        if number is not None and float(number) > 0 and len(s) <= 40:
            return Budget(s, budget_on)
        percent = _PERCENT.fullmatch(s)
        if percent and 0 < float(percent.group(1)) <= 1e6:
            return Budget(s, budget_on)
    raise ValueError(f"budget {budget!r}: expected a fraction (0.5), bytes (int) or a string memplan reads: a size "
                     "('2GB', '512MiB'), a percentage ('40%') or 'saved:F'")
