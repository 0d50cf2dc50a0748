"""A plan read back: what runs at each step, which buffers end where, what crosses from the forward to the
backward, and the plan's live bytes as the step's tensors (not the planned graph's) count them; and a
backward FX module rebuilt in the plan's order."""
from __future__ import annotations

import dataclasses

import torch.fx

from ..step.joint import Joint
from .lower import Mapping


@dataclasses.dataclass
class Schedule:
    """A plan turned into what the interpreter does at each step."""
    steps: list             # per step: (op name, fx node name or None for update ops)
    frees: list             # per step: memplan tensor names whose buffer ends there
    split: int              # the first step of the backward half
    saved: list             # tensor names kept from the forward half into the backward half
    saved_bytes: int        # their bytes
    live_peak: int          # the plan's largest sum of live buffer bytes
    seed_live: int          # the bytes live at the backward's seed (the step `split`), workspace aside
    arena: int              # the plan's arena_bytes
    recomputed: list        # op names run more than once


def _returned(graph: dict, mapping: Mapping, joint: Joint) -> set:
    """What the step returns (gradients, the loss, new buffer values): it stays until the step ends; the
    plan frees gradients at their update ops, which the user's optimizer runs after the backward."""
    returned = set(graph.get("outputs", []))
    for node in list(joint.grads) + list(joint.mutations) + [joint.loss]:
        returned.update(mapping.tensor_of[node])
    return returned


def schedule_of(graph: dict, mapping: Mapping, plan: dict, joint: Joint) -> Schedule:
    seed_node = joint.seed
    returned = _returned(graph, mapping, joint)
    steps = [(s["op"], mapping.op_node.get(s["op"])) for s in plan["steps"]]
    n = len(steps)
    frees = [[] for _ in range(n)]
    tbytes = {t["name"]: t["bytes"] for t in graph["tensors"]}
    persistent = {t["name"] for t in graph["tensors"] if t.get("persistent")}
    wbytes = {op["name"]: op.get("workspace", 0) for op in graph["ops"]}
    delta = [0] * (n + 1)
    for b in plan["buffers"]:
        t = b.get("tensor")
        if t is None or t not in tbytes:
            continue  # a workspace, counted at its op's step below, or the room of a saved-bytes plan
        # Sizes from `graph`, not from the plan: a plan of a saved-bytes budget (`memplan plan --budget-on
        # saved`) has 0-byte backward buffers, and this is the real step's memory.
        delta[b["first"]] += tbytes[t]
        delta[b["last"] + 1] -= tbytes[t]
        if b.get("alias") in tbytes:  # written in place over a tensor that dies at this step: counted once
            shared = min(tbytes[b["alias"]], tbytes[t])
            delta[b["first"]] -= shared
            delta[b["first"] + 1] += shared
        if t in persistent or t in returned:
            continue
        if b["last"] < n - 1:
            frees[b["last"]].append(t)
    live, peak, live_at = 0, 0, []
    for i in range(n):
        live += delta[i]
        live_at.append(live)
        # Each op's workspace while it runs, from `graph` too: a saved-bytes plan's backward ops have none,
        # so it has no workspace buffer for them, but their kernels still allocate it.
        peak = max(peak, live + wbytes.get(steps[i][0], 0))
    # Backward half: from the step that runs the seed (ones_like of the loss) on.
    split = n
    seed_op = next((op for op, node in mapping.op_node.items() if node == seed_node), None)
    for i, (op, _) in enumerate(steps):
        if op == seed_op or mapping.op_phase.get(op) == "update":
            split = i
            break
    # Saved for the backward: what crosses the seed, but not what the step returns (the loss), which
    # PyTorch's partitioner does not count either.
    saved = sorted({b["tensor"] for b in plan["buffers"] if b.get("tensor") in tbytes
                    and b["tensor"] not in persistent and b["tensor"] not in returned
                    and b["first"] < split <= b["last"]})
    counts: dict = {}
    for op, _ in steps:
        counts[op] = counts.get(op, 0) + 1
    return Schedule(steps=steps, frees=frees, split=split, saved=saved,
                    saved_bytes=int(sum(tbytes[t] for t in saved)), live_peak=peak,
                    seed_live=int(live_at[split]) if split < n else int(live),
                    arena=int(plan["arena_bytes"]), recomputed=sorted(o for o, c in counts.items() if c > 1))


def backward_in_plan_order(bw: torch.fx.GraphModule, sched: Schedule, mapping: Mapping) -> None:
    """Rebuilds the backward module as the plan's backward steps: placeholders first, then each node the
    plan runs, at each of its steps (a forward op the plan recomputes twice in the backward becomes two
    nodes, and each reader reads the latest one, so that the first copy dies where the plan frees it), a
    node the plan does not name (a view, a getitem, a point-wise value inlined into its readers) just
    before its first reader, again after any of its inputs is run anew; the output last."""
    old = bw.graph
    by_name = {n.name: n for n in old.nodes}
    new = torch.fx.Graph(owning_module=bw)
    current: dict = {}  # old node -> its latest copy
    made_from: dict = {}  # old node not named by the plan -> the copies of the inputs its latest copy read
    named = {node for i, (_, node) in enumerate(sched.steps) if node is not None and i >= sched.split}

    def resolve(a):
        if a.op in ("placeholder", "get_attr") or (a.name in named and a in current):
            if a not in current:
                current[a] = new.node_copy(a, resolve)
            return current[a]
        inputs = tuple(resolve(x) for x in a.all_input_nodes)
        if a in current and made_from.get(a) == inputs:
            return current[a]
        current[a], made_from[a] = new.node_copy(a, resolve), inputs
        return current[a]

    for n in old.nodes:
        if n.op == "placeholder":
            resolve(n)
    for i in range(sched.split, len(sched.steps)):
        n = by_name.get(sched.steps[i][1])
        if n is not None and n.op == "call_function":
            inputs = [resolve(x) for x in n.all_input_nodes]  # noqa: F841 - made before the node itself
            current[n] = new.node_copy(n, resolve)
    for n in old.nodes:  # what the plan does not run but the graph holds for its effects
        if n.op == "call_function" and not n.users and n not in current:
            resolve(n)
    new.node_copy(old.output_node(), resolve)
    new.lint()
    bw.graph = new
    bw.recompile()
