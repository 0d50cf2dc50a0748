"""The C++ side, through the `memplan` command and the JSON formats.

The command is found, in this order, at ``$MEMPLAN`` (a path), on ``PATH``, or in
the repository's ``build/bin/`` (when the package runs from a checkout).
"""
from __future__ import annotations

import json
import os
import pathlib
import re
import shutil
import subprocess
import tempfile

from .budget import Budget, read


class MemplanError(RuntimeError):
    """The memplan command failed; the message is its own. ``report``: the command's JSON report when it
    printed one (``plan --json``: for a missed peak budget, "smallest" is the smallest plan memplan found and
    what is live at its peak), else None."""

    def __init__(self, message: str, report: dict | None = None):
        super().__init__(message)
        self.report = report


class Infeasible(MemplanError):
    """No schedule fits the budget: the message names the memory and the op that needs it."""


class NoPlan(MemplanError):
    """The planner found no plan within its time limit."""


def executable() -> str:
    env = os.environ.get("MEMPLAN")
    if env:
        if not os.access(env, os.X_OK):
            raise MemplanError(f"$MEMPLAN is '{env}', which is not an executable file")
        return env
    found = shutil.which("memplan")
    if found:
        return found
    here = pathlib.Path(__file__).resolve()
    for root in here.parents:
        cand = root / "build" / "bin" / "memplan"
        if cand.is_file() and os.access(cand, os.X_OK):
            return str(cand)
    raise MemplanError("the memplan command was not found: set $MEMPLAN, put it on PATH, "
                       "or build the repository (bash cmake/setup.sh build)")


def run(args: list[str], check: bool = True) -> subprocess.CompletedProcess:
    p = subprocess.run([executable(), *args], capture_output=True, text=True)
    if check and p.returncode != 0:
        msg = (p.stderr.strip().splitlines() or [f"exit {p.returncode}"])[-1]
        msg = re.sub(r"^memplan: (error: |infeasible: |no plan: )?", "", msg)
        report = _report(p.stdout) if "--json" in args else None
        if p.returncode == 4:
            raise Infeasible(msg, report)
        if p.returncode == 1 and "--budget" in args:
            raise NoPlan(msg, report)
        raise MemplanError(f"memplan {args[0]}: {msg}", report)
    return p


def _report(stdout: str) -> dict | None:
    try:
        report = json.loads(stdout)
    except ValueError:
        return None
    return report if isinstance(report, dict) else None


def write_json(obj, path) -> None:
    """Atomically: a temporary file beside `path`, then a rename."""
    path = pathlib.Path(path)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=path.name + ".", suffix=".tmp")
    try:
        with os.fdopen(fd, "w") as f:
            json.dump(obj, f)
        os.replace(tmp, path)
    except BaseException:
        if os.path.exists(tmp):
            os.unlink(tmp)
        raise


def seconds_for(graph: dict, time_limit: float | None) -> float:
    """The time limit of planning `graph`: `time_limit`, or where it is None the default, which grows with
    the graph: 2 s, and 1 s more per 400 ops beyond 800 (a 1,200-op region gets 3 s)."""
    if time_limit is not None:
        return float(time_limit)
    return max(2.0, len(graph.get("ops", ())) / 400.0)


def plan(graph: dict, budget=None, remat: str = "auto", time_limit: float | None = 10.0,
         extra: list[str] | None = None) -> tuple[dict, dict]:
    """memplan's plan of `graph`, in one ``memplan plan`` process: under `budget` (a ``budget.Budget``, or
    anything ``budget.read`` takes, of the peak; memplan resolves it against the store-all plan it makes),
    else store-all; `time_limit` in seconds bounds the process (None: ``seconds_for``'s default, which grows
    with the graph). Returns the plan dict and the
    command's report (``memplan plan --json``: "arena", "overhead", "planner", "seconds", "budget",
    "store_all", "resident", "kept"...)."""
    if not isinstance(budget, Budget):
        budget = read(budget)
    with tempfile.TemporaryDirectory(prefix="memplan_torch.") as d:
        gpath, ppath = os.path.join(d, "graph.json"), os.path.join(d, "plan.json")
        write_json(graph, gpath)
        args = ["plan", gpath, "-o", ppath, "--time-limit", f"{seconds_for(graph, time_limit):g}", "--json"]
        if budget.arg is not None:
            args += budget.args() + ["--remat", remat]
        elif not any(a == "--alloc" for a in extra or []):
            # Without a budget nothing is recomputed and the executor does not use offsets: the best
            # heuristic placement, not the exact search until the time limit.
            args += ["--alloc", "best_heuristic"]
        args += extra or []
        p = run(args)
        with open(ppath) as f:
            return json.load(f), json.loads(p.stdout)


def check(graph: dict, plan_: dict, budget_on: str = "peak") -> tuple[bool, str]:
    """`memplan check`: (valid, its report). ``budget_on="saved"``: `plan_` is a plan of `graph` under a
    saved-bytes budget (``memplan plan --budget-on saved``), checked against the graph memplan planned."""
    with tempfile.TemporaryDirectory(prefix="memplan_torch.") as d:
        gpath, ppath = os.path.join(d, "graph.json"), os.path.join(d, "plan.json")
        write_json(graph, gpath)
        write_json(plan_, ppath)
        extra = ["--budget-on", budget_on] if budget_on != "peak" else []
        p = run(["check", gpath, ppath, *extra], check=False)
        if p.returncode not in (0, 1):
            raise MemplanError(f"memplan check: {p.stderr.strip()}")
        return p.returncode == 0, (p.stdout + p.stderr).strip()
def stats(graph: dict) -> dict:
    """``memplan stats --json``: lower bounds in bytes ("lb_default" for the listed order, "lb_any" for any
    order), "persistent_bytes", "total_bytes", op and tensor counts."""
    with tempfile.TemporaryDirectory(prefix="memplan_torch.") as d:
        gpath = os.path.join(d, "graph.json")
        write_json(graph, gpath)
        return json.loads(run(["stats", gpath, "--json"]).stdout)
