#!/usr/bin/env python3
"""Checks the layers of the PyTorch frontend (python/memplan_torch), the Python twin of check_layers.sh.

The table below is the one definition of the package's layers (docs/torch.md, "Layout", explains it): one
line per module or subpackage, lowest first, with the modules of the package it may import (at the top of
a file or inside a function alike). Every module a line names must have its own line above it, so the
table has no cycle; files of one subpackage may import each other, but no file-level import cycle is
allowed anywhere. Three more rules:

- private PyTorch names (a module or attribute whose name starts with one underscore: ``torch._inductor``,
  ``module._parameters``, ``target._schema``) appear only in ``_compat.py``;
- no underscore name is imported from another file of the project (``from x import _y``, ``x._y`` on a
  project module), in the package, its tests (python/tests) or the benches (bench/torch); the package's
  own ``_compat`` module is imported by the package alone;
- no package file is over 400 lines.

Usage: tests/layers/check_python.py [REPO_ROOT]. Prints each violation as "file:line: what" and exits 1
when there is any, 0 otherwise (2 for a broken table). CTest runs it as `repo.python_layers`. Only the
standard library is needed: the files are parsed, not imported.
"""
from __future__ import annotations

import ast
import pathlib
import sys

PACKAGE = "memplan_torch"
MAX_LINES = 400

# module or subpackage | may import
LAYERS = """
_compat     |
budget      |
command     | budget
device      |
costs       | device
probe       | _compat device
workspaces  | _compat device probe
step        | _compat
graph       | _compat costs device step workspaces
export      | graph
planned     | budget command device graph step
regions     | budget command graph step
partitioner | _compat budget command costs graph probe regions step
__main__    | command export step
__init__    | command export planned partitioner step
"""


def parse_table(text: str) -> dict[str, set[str]] | None:
    allowed: dict[str, set[str]] = {}
    ok = True
    for row in text.strip().splitlines():
        name, _, deps = (c.strip() for c in row.partition("|"))
        if name in allowed:
            print(f"check_python: {name} has two lines in the table")
            ok = False
        for d in deps.split():
            if d not in allowed:
                print(f"check_python: in the table, {name} may import {d}, which has no line above it")
                ok = False
        allowed[name] = set(deps.split())
    return allowed if ok else None


def is_private(name: str) -> bool:
    return name.startswith("_") and not (name.startswith("__") and name.endswith("__"))


class FileCheck:
    """One file's imports of package modules, and the rules it breaks."""

    def __init__(self, path: pathlib.Path, root: pathlib.Path, package_dir: pathlib.Path, known: set[str]):
        self.path, self.rel, self.known = path, path.relative_to(root).as_posix(), known
        self.in_package = package_dir in path.parents
        # Modules the file's own folder holds (a test's `models`, a bench's `common`) are the project's too.
        self.local = set() if self.in_package else {p.stem for p in path.parent.glob("*.py")}
        parts = path.relative_to(package_dir.parent).with_suffix("").parts if self.in_package else ()
        self.module = ".".join(parts)                        # memplan_torch.graph.lower
        self.unit = parts[1] if len(parts) > 1 else None     # its line in the table: graph
        text = path.read_text()
        self.lines = text.count("\n")
        self.tree = ast.parse(text, str(path))
        self.imports: list[tuple[int, str]] = []   # (line, package module imported)
        self.problems: list[str] = []
        self.project_names: set[str] = set()       # names the file binds to project modules

    def resolve(self, node: ast.ImportFrom) -> str:
        if not node.level:
            return node.module or ""
        base = self.module.split(".")[: -node.level]
        return ".".join(base + ([node.module] if node.module else []))

    def project(self, module: str) -> bool:
        return module.split(".")[0] in {PACKAGE} | self.local

    def note(self, line: int, what: str) -> None:
        self.problems.append(f"{self.rel}:{line}: {what}")

    def check(self) -> None:
        for node in ast.walk(self.tree):
            if isinstance(node, ast.Import):
                for a in node.names:
                    self.imported(node.lineno, a.name, None)
                    if self.project(a.name):
                        self.project_names.add((a.asname or a.name).split(".")[0])
            elif isinstance(node, ast.ImportFrom):
                module = self.resolve(node)
                for a in node.names:
                    self.imported(node.lineno, module, a.name)
                    if self.project(module):
                        self.project_names.add(a.asname or a.name)
        for node in ast.walk(self.tree):
            if not (isinstance(node, ast.Attribute) and is_private(node.attr)):
                continue
            owner = node.value.id if isinstance(node.value, ast.Name) else None
            if owner in ("self", "cls"):
                continue
            if owner in self.project_names:
                self.note(node.lineno, f"'{owner}.{node.attr}': an underscore name of another file")
            elif self.in_package and self.unit != "_compat":
                self.note(node.lineno, f"'.{node.attr}': a private name (only _compat.py names PyTorch's)")

    def imported(self, line: int, module: str, name: str | None) -> None:
        full = f"{module}.{name}" if name else module
        if not self.project(module):
            if self.in_package and self.unit != "_compat" and any(is_private(p) for p in full.split(".")):
                self.note(line, f"imports {full}: a private PyTorch name (only _compat.py names them)")
            return
        if module.split(".")[0] == PACKAGE:
            self.imports.append((line, full if full in self.known else module))
        if full == f"{PACKAGE}._compat" and self.in_package:
            return  # the package's private module, for the package alone
        if any(is_private(p) for p in full.split(".")):
            self.note(line, f"imports {full}: an underscore name of another file")


def unit_of(module: str) -> str:
    parts = module.split(".")
    return parts[1] if len(parts) > 1 else "__init__"


def main(argv: list[str]) -> int:
    root = pathlib.Path(argv[1] if len(argv) > 1 else pathlib.Path(__file__).resolve().parents[2])
    package_dir = root / "python" / PACKAGE
    if not package_dir.is_dir():
        print(f"check_python: no {package_dir}", file=sys.stderr)
        return 2
    allowed = parse_table(LAYERS)
    if allowed is None:
        return 2
    package = sorted(package_dir.rglob("*.py"))
    files = package + sorted((root / "python" / "tests").glob("*.py")) + sorted((root / "bench" / "torch").glob("*.py"))
    known = {".".join(p.relative_to(package_dir.parent).with_suffix("").parts) for p in package}
    problems: list[str] = []
    edges: dict[str, set[str]] = {}
    for path in files:
        f = FileCheck(path, root, package_dir, known)
        f.check()
        problems += f.problems
        if not f.in_package:
            continue
        unit = f.unit or "__init__"
        if unit not in allowed:
            problems.append(f"{f.rel}:1: {unit} is not in the layer table (tests/layers/check_python.py)")
            continue
        if f.lines > MAX_LINES:
            problems.append(f"{f.rel}:1: {f.lines} lines, over {MAX_LINES}: split it by job")
        for line, target in f.imports:
            to = unit_of(target)
            if to != unit and to not in allowed[unit]:
                why = "not in the layer table" if to not in allowed else "forbidden"
                problems.append(f"{f.rel}:{line}: {unit} -> {to} ({why}): imports {target}")
            if target != f.module:
                edges.setdefault(f.module, set()).add(target)
    problems += cycles(edges)
    if problems:
        print("\n".join(problems))
        print("check_python: the package's layers, private names or underscore imports are broken "
              "(table: tests/layers/check_python.py, docs/torch.md \"Layout\")")
        return 1
    n = sum(len(v) for v in edges.values())
    print(f"check_python: {n} imports between the {len(package)} files of {PACKAGE}, all down the layers, no "
          f"cycle; private PyTorch names only in _compat.py; no underscore name imported across {len(files)} files")
    return 0


def cycles(edges: dict[str, set[str]]) -> list[str]:
    """One line for each import cycle between files found by a depth-first walk."""
    found, state = [], {}

    def walk(m: str, stack: list[str]) -> None:
        state[m] = "open"
        for t in sorted(edges.get(m, ())):
            if state.get(t) == "open":
                found.append("import cycle: " + " -> ".join(stack[stack.index(t):] + [t]))
            elif t not in state:
                walk(t, stack + [t])
        state[m] = "done"

    for m in sorted(edges):
        if m not in state:
            walk(m, [m])
    return found


if __name__ == "__main__":
    sys.exit(main(sys.argv))
