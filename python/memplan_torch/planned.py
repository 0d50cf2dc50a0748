"""Train in PyTorch with memplan's plan.

``compile(model, budget, example_inputs, targets=...)`` exports the training step,
asks memplan for a plan under the budget, and returns a module whose call runs
the step as planned: an ``autograd.Function`` whose forward runs the plan's steps
up to the backward's seed and keeps exactly the buffers the plan keeps past that
point, and whose backward runs the rest of the plan in its order, recomputing
what the plan recomputes. Both halves run the joint graph's ATen nodes eagerly
(no code generation); a value is dropped at the step where its buffer ends in
the plan, so what is alive is what the plan says. The optimizer's update ops are
the user's optimizer (``opt.step()``), which updates ``.grad`` as usual.

This is the partition that aot_autograd's ``partition_fn`` makes (a forward that
saves a set of tensors, a backward that recomputes the rest), with memplan's
choice of the set and of the backward's order; it is run by a small interpreter
here rather than through ``aot_function``, so that the graph planned is the graph
run, name for name.

Random nodes (dropout) draw from the user's generator of their device, as in the
unplanned step: the first run of each draws from the live stream, and a node the
plan runs again replays the state its first run started from (kept when it was
drawn: the CPU's or the CUDA device's generator state, as ``torch.utils.checkpoint``
keeps it), then gives the live stream back as it found it. So a recomputed mask is
the first one, and after a planned step the user's random streams are where the
unplanned step leaves them: each random node has drawn once.
"""
from __future__ import annotations

import dataclasses
import operator
from typing import Callable, Sequence

import torch
import torch.fx

from . import command
from . import device as _device
from .export import Joint, Mapping, _tensors_of, autocast_as, autocast_state, export_with_mapping, step_loss


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


def resident_at_seed(graph: dict, mapping: Mapping, joint: Joint) -> int:
    """The bytes live at the backward's seed whatever the plan saves: the persistent tensors (parameters,
    buffers, inputs) and what the forward makes that the step returns (the loss, new buffer values). Any
    plan's ``seed_live`` is this plus its ``saved_bytes``."""
    returned = _returned(graph, mapping, joint)
    made = {t for op in graph["ops"] if op["phase"] == "forward" for t in op["outputs"]}
    return int(sum(t["bytes"] for t in graph["tensors"] if t["name"] != PHANTOM
                   and (t.get("persistent") or (t["name"] in returned and t["name"] in made))))


def schedule_of(graph: dict, mapping: Mapping, plan: dict, joint: Joint) -> Schedule:
    seed_node = joint.seed
    returned = _returned(graph, mapping, joint)
    steps = [(s["op"], mapping.op_node.get(s["op"])) for s in plan["steps"]]
    n = len(steps)
    frees = [[] for _ in range(n)]
    tbytes = {t["name"]: t["bytes"] for t in graph["tensors"] if t["name"] != PHANTOM}
    persistent = {t["name"] for t in graph["tensors"] if t.get("persistent")}
    wbytes = {op["name"]: op.get("workspace", 0) for op in graph["ops"]}
    delta = [0] * (n + 1)
    for b in plan["buffers"]:
        t = b.get("tensor")
        if t is None or t not in tbytes:
            continue  # a workspace, counted at its op's step below, or forward_memory_graph's PHANTOM
        # Sizes from `graph`, not from the plan: a plan made on forward_memory_graph has 0-byte
        # backward buffers, and this is the real step's memory.
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
        # Each op's workspace while it runs, from `graph` too: forward_memory_graph's backward ops have
        # none, so its plans have no workspace buffer for them, but their kernels still allocate it.
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


class Interpreter:
    """Runs the joint graph's nodes in the plan's order, keeping values as the plan keeps buffers."""

    def __init__(self, joint: Joint, mapping: Mapping, schedule: Schedule):
        self.joint, self.mapping, self.sched = joint, mapping, schedule
        self.nodes = {n.name: n for n in joint.gm.graph.nodes}
        phs = [n for n in joint.gm.graph.nodes if n.op == "placeholder"]
        # The parameters lead (autograd.Function routes their gradients), then buffers and inputs.
        self.param_placeholders = [n for n in phs if n.name in joint.params]
        self.other_placeholders = [n for n in phs if n.name not in joint.params]
        self.placeholders = self.param_placeholders + self.other_placeholders
        # Constants the trace lifted (get_attr nodes): the GraphModule holds their values, for every step.
        self.constants = {name: getattr(joint.gm, target) for name, target in joint.constants.items()}
        self.op_nodes = set(mapping.op_node.values())
        # Random nodes: the device whose generator each draws from (its output's), and those the plan runs
        # more than once (their first run keeps the generator state it started from, to replay it).
        self.rng_device = {}
        for o in mapping.random_ops:
            node = mapping.op_node[o]
            vals = [t for t in _tensors_of(self.nodes[node].meta.get("val")) if t is not None]
            self.rng_device[node] = vals[0].device if vals else torch.device("cpu")
        runs: dict = {}
        for _, node in schedule.steps:
            runs[node] = runs.get(node, 0) + 1
        self.replayed = {n for n in self.rng_device if runs.get(n, 0) > 1}
        self.getitems = {}
        for n in joint.gm.graph.nodes:
            if n.op == "call_function" and n.target is operator.getitem and isinstance(n.args[1], int):
                self.getitems.setdefault(n.args[0].name, []).append(n)

    def bind(self, args: Sequence) -> dict:
        """The values the step starts with: `args` for the placeholders (parameters first), and the
        constants (persistent: no plan frees them)."""
        if len(args) != len(self.placeholders):
            raise RuntimeError(f"memplan_torch: {len(args)} values for {len(self.placeholders)} placeholders (a bug)")
        env = dict(self.constants)
        for ph, a in zip(self.placeholders, args):
            env[ph.name] = a
        return env

    def value(self, env: dict, node: torch.fx.Node):
        v = env.get(node.name)
        if v is not None or node.name in env:
            return v
        if node.op == "call_function" and node.name not in self.op_nodes:
            # A view, alias or getitem: derived from values that are live now (cached until freed).
            v = self._call(env, node)
            env[node.name] = v
            return v
        raise RuntimeError(f"memplan_torch: the plan reads '{node.name}' when it is not live (a bug)")

    def _arg(self, env, a):
        if isinstance(a, torch.fx.Node):
            return self.value(env, a)
        if isinstance(a, (list, tuple)):
            return type(a)(self._arg(env, x) for x in a)
        if isinstance(a, dict):
            return {k: self._arg(env, v) for k, v in a.items()}
        return a

    def _call(self, env, node):
        args = self._arg(env, node.args)
        kwargs = self._arg(env, node.kwargs)
        return node.target(*args, **kwargs)

    def _random(self, env, node, rng: dict):
        """A random node: its first run draws from the live stream of its device's generator (keeping the
        state it starts from when the plan runs the node again); a later run replays that state and leaves
        the live stream as it found it."""
        dev = self.rng_device[node.name]
        start = rng.get(node.name)
        if start is None:
            if node.name in self.replayed:
                rng[node.name] = _device.rng_state(dev)
            return self._call(env, node)
        live = _device.rng_state(dev)
        _device.set_rng_state(dev, start)
        try:
            return self._call(env, node)
        finally:
            _device.set_rng_state(dev, live)

    def run(self, env: dict, lo: int, hi: int, rng: dict, grad_seed=None) -> None:
        """Runs the plan's steps lo..hi-1 on `env`; `rng` holds the random nodes' kept generator states
        (filled by the first runs, read by the replays)."""
        with autocast_as(()):  # the graph holds the casts of the autocast it was traced under
            self._run(env, lo, hi, rng, grad_seed)

    def _run(self, env, lo, hi, rng, grad_seed) -> None:
        sched = self.sched
        for i in range(lo, hi):
            op, node_name = sched.steps[i]
            if node_name is not None:
                node = self.nodes[node_name]
                if node_name == self.joint.seed and grad_seed is not None:
                    out = grad_seed.reshape(node.meta["val"].shape).to(node.meta["val"].dtype).clone()
                elif node_name in self.rng_device:
                    out = self._random(env, node, rng)
                else:
                    out = self._call(env, node)
                if isinstance(out, (tuple, list)):
                    for gi in self.getitems.get(node_name, []):
                        env[gi.name] = out[gi.args[1]]
                else:
                    env[node_name] = out
                del out
            for t in sched.frees[i]:
                for m in self.mapping.members.get(t, ()):
                    env.pop(m, None)


class _PlannedStep(torch.autograd.Function):
    @staticmethod
    def forward(ctx, runner, n_params, *flat):
        interp: Interpreter = runner.interp
        env = interp.bind(flat)
        rng: dict = {}
        interp.run(env, 0, interp.sched.split, rng)
        loss = interp.value(env, interp.nodes[runner.joint.loss]).detach().clone()
        ctx.runner, ctx.env, ctx.rng, ctx.n_params = runner, env, rng, n_params
        ctx.n_inputs = len(flat) - n_params
        return loss

    @staticmethod
    def backward(ctx, grad_loss):
        runner, env = ctx.runner, ctx.env
        interp: Interpreter = runner.interp
        steps = interp.sched.steps
        interp.run(env, interp.sched.split, len(steps), ctx.rng, grad_seed=grad_loss)
        grads = []
        for fqn in runner.param_order:
            node = runner.grad_node.get(fqn)
            grads.append(interp.value(env, interp.nodes[node]) if node is not None else None)
        for node, fqn in runner.joint.mutations.items():
            with torch.no_grad():
                runner.joint.buffer_tensors[fqn].copy_(interp.value(env, interp.nodes[node]))
        ctx.env = ctx.rng = None
        env.clear()
        return (None, None, *grads, *([None] * ctx.n_inputs))


class PlannedModule(torch.nn.Module):
    """A model whose training step (``loss = m(*inputs, *targets); loss.backward()``) follows a memplan plan.

    Attributes: ``graph`` (the exported memplan.graph), ``plan`` (memplan's plan), ``schedule``
    (saved tensors, recomputed ops, the plan's live peak and arena), ``report`` (``memplan plan --json``'s report).
    In eval mode, or without gradients, it runs the original model and returns its output."""

    def __init__(self, model, loss_fn, n_inputs, graph, joint, mapping, plan, report):
        super().__init__()
        self.model = model
        self.loss_fn = loss_fn
        self.n_inputs = n_inputs
        self.graph, self.joint, self.mapping, self.plan, self.report = graph, joint, mapping, plan, report
        self.schedule = schedule_of(graph, mapping, plan, joint)
        self.interp = Interpreter(joint, mapping, self.schedule)
        self.param_order = [joint.params[n.name] for n in self.interp.param_placeholders]
        self.grad_node = {fqn: node for node, fqn in joint.grads.items()}

    def forward(self, *args):
        if not (self.training and torch.is_grad_enabled()):
            if len(args) == self.n_inputs:
                return self.model(*args)
            return step_loss(self.model, self.loss_fn, args[: self.n_inputs], args[self.n_inputs:])
        if autocast_state() != self.joint.autocast:
            def said(state):
                return " and ".join(f"autocast {d} {str(t).replace('torch.', '')}" for d, t in state) or "no autocast"
            raise ValueError(f"the plan was traced under {said(self.joint.autocast)} and is called under "
                             f"{said(autocast_state())}: its casts are the trace's; call it as it was compiled "
                             "(or compile again)")
        if len(args) != len(self.joint.inputs):
            raise TypeError(f"the planned step takes {len(self.joint.inputs)} tensors (the model's inputs, "
                            f"then the targets); got {len(args)}")
        for i, (a, ph) in enumerate(zip(args, (self.interp.nodes[n] for n in self.joint.inputs))):
            want = ph.meta["val"]
            what = f"input {i}" if i < self.n_inputs else f"input {i} (target {i - self.n_inputs})"
            if not isinstance(a, torch.Tensor) or tuple(a.shape) != tuple(want.shape) or a.dtype != want.dtype:
                got = f"{tuple(a.shape)} {a.dtype}" if isinstance(a, torch.Tensor) else type(a).__name__
                raise ValueError(f"{what}: the plan is for {tuple(want.shape)} {want.dtype}, got {got}; "
                                 "compile again for other shapes")
            if a.device != want.device:
                raise ValueError(f"{what}: the plan is for a tensor on device {want.device}, got one on device "
                                 f"{a.device}; move it to {want.device} (or compile again on {a.device})")
        for ph in self.interp.param_placeholders:
            fqn = self.joint.params[ph.name]
            t, want = self.joint.param_tensors[fqn], ph.meta["val"].device
            if t.device != want:
                raise ValueError(f"parameter '{fqn}': the plan is for device {want}, and it is on {t.device}; "
                                 "compile again after moving the model")
        for fqn in self.param_order:
            trained, wants = fqn in self.grad_node, self.joint.param_tensors[fqn].requires_grad
            if trained != wants and (trained or self.joint.no_grad.get(fqn) == "frozen"):
                raise ValueError(f"parameter '{fqn}': requires_grad is {wants} and was {not wants} when the step "
                                 f"was compiled (the plan {'has' if trained else 'has no'} gradient for it); "
                                 "compile again")
        params = [self.joint.param_tensors[f] for f in self.param_order]
        given = dict(zip(self.joint.inputs, args))
        # Buffers detached: a tied parameter's name the step does not read is traced as a buffer.
        rest = [self.joint.buffer_tensors[self.joint.buffers[n.name]].detach() if n.name in self.joint.buffers
                else given[n.name] for n in self.interp.other_placeholders]
        return _PlannedStep.apply(self, len(params), *params, *rest)


PHANTOM = "memplan_torch.seed_room"        # the tensor forward_memory_graph adds, and the op that makes it


def forward_memory_graph(graph: dict, seed_op: str | None = None) -> tuple[dict, int]:
    """`graph` planned for a budget on what crosses from the forward to the backward: (that graph, the
    bytes R a budget B must be raised by on it).

    A plan of it under B + R holds at most B at the backward's seed (`seed_op`; by default the first op
    listed outside the forward): the parameters and other persistent tensors, the loss, and the bytes
    saved for the backward, which is what PyTorch's ``activation_memory_budget`` bounds. Neither the
    forward's transients nor the backward's own memory count against it, as they do not in PyTorch's
    knapsack:
    - what the backward and the update produce, and their workspaces, are 0 bytes;
    - an op ``PHANTOM``, listed just before the seed, makes a tensor ``PHANTOM`` of R bytes that the
      seed reads: it exists only at those two steps. R is every forward tensor's bytes plus the largest
      forward workspace, so that anywhere else (the forward, what the backward recomputes) there is
      room for everything. The executor runs no node for the op (``schedule_of`` skips the tensor).
    The idea of planning a part on its forward memory alone is the one block_dp uses for its blocks."""
    g = dict(graph)
    later = [op for op in graph["ops"] if op["phase"] != "forward"]
    zero = {t for op in later for t in op["outputs"]}
    forward_out = {t for op in graph["ops"] if op["phase"] == "forward" for t in op["outputs"]}
    persistent = {t["name"] for t in graph["tensors"] if t.get("persistent")}
    room = sum(t["bytes"] for t in graph["tensors"] if t["name"] in forward_out and t["name"] not in persistent)
    room += max((op.get("workspace", 0) for op in graph["ops"] if op["phase"] == "forward"), default=0)
    room = -(-room // 4096) * 4096  # whole pages: an arena's alignment (256 by default) divides it
    if seed_op is None:
        seed_op = later[0]["name"] if later else None
    if seed_op is None or room == 0:
        room = 0
    g["tensors"] = [dict(t, bytes=0) if t["name"] in zero else t for t in graph["tensors"]]
    if room:
        if any(t["name"] == PHANTOM for t in graph["tensors"]) or any(o["name"] == PHANTOM for o in graph["ops"]):
            raise ValueError(f"graph '{graph['name']}' already has a tensor or op '{PHANTOM}'")
        g["tensors"] = g["tensors"] + [{"name": PHANTOM, "bytes": room}]
    ops = []
    for op in graph["ops"]:
        if op["phase"] != "forward" and op.get("workspace"):
            op = dict(op, workspace=0)
        if op["name"] == seed_op and room:
            ops.append({"name": PHANTOM, "inputs": [], "outputs": [PHANTOM], "phase": "backward", "cost": 0.0})
            op = dict(op, inputs=list(op["inputs"]) + [PHANTOM])
            if op.get("variants"):
                op["variants"] = [dict(v, inputs=list(v["inputs"]) + [PHANTOM]) if "inputs" in v else v
                                  for v in op["variants"]]
        ops.append(op)
    g["ops"] = ops
    g["name"] = graph["name"]
    return g, room


def budget_bytes(graph: dict, mapping: Mapping, joint: Joint, budget, time_limit: float = 10.0):
    """A fraction f in (0, 1] is a budget on the bytes saved for the backward, as PyTorch's
    ``activation_memory_budget`` is, turned into the peak memplan plans for: the store-all plan's arena
    A less the (1 - f) share of what store-all saves, S: A - (1 - f) S (the peak the step would have if
    saving f S instead of S changed nothing else; at f = 1, store-all's own arena). Other budgets pass
    through (bytes, '2GB', '40%' of the store-all arena). Returns (budget for memplan, the store-all
    schedule or None)."""
    if not isinstance(budget, float):
        return budget, None
    if not 0 < budget <= 1:
        raise ValueError(f"budget {budget}: a fraction must be in (0, 1]")
    store_all, _ = command.plan(graph, None, time_limit=time_limit)
    sched = schedule_of(graph, mapping, store_all, joint)
    return round(max(sched.live_peak, sched.arena) - (1 - budget) * sched.saved_bytes), sched


_UNITS = {"": 1, "B": 1, "KiB": 1 << 10, "MiB": 1 << 20, "GiB": 1 << 30, "TiB": 1 << 40,
          "KB": 10 ** 3, "MB": 10 ** 6, "GB": 10 ** 9, "TB": 10 ** 12}


def forward_budget_bytes(graph: dict, mapping: Mapping, joint: Joint, budget, time_limit: float = 10.0,
                         seed_op: str | None = None):
    """A budget on the bytes live at the backward's seed (``budget_on="saved"``: the resident tensors,
    the loss and what is saved for the backward), before forward_memory_graph's room is added: a
    fraction f of the bytes store-all saves, S (store-all's bytes at the seed, A, less (1 - f) S), bytes
    (int), a size as memplan reads it ('2GB', '512MiB'), or 'P%' of A. Returns (bytes or None, the
    store-all schedule or None)."""
    if budget is None:
        return None, None
    if isinstance(budget, int):
        if budget <= 0:
            raise ValueError(f"budget {budget}: bytes must be positive")
        return budget, None
    import re
    m = None if isinstance(budget, float) else re.fullmatch(r"([0-9]*\.?[0-9]+(?:[eE][0-9]+)?)(%|[KMGT]i?B|B)?",
                                                            str(budget).strip())
    if not isinstance(budget, float) and (not m or (m.group(2) not in (None, "%") and m.group(2) not in _UNITS)):
        raise ValueError(f"budget {budget!r}: expected a fraction (0.5), bytes (int), a size ('2GB', "
                         "'512MiB') or a percentage ('40%' of store-all's bytes at the backward's seed)")
    if m and m.group(2) != "%":
        return int(float(m.group(1)) * _UNITS[m.group(2) or ""]), None
    if isinstance(budget, float) and not 0 < budget <= 1:
        raise ValueError(f"budget {budget}: a fraction must be in (0, 1]")
    fwd, _ = forward_memory_graph(graph, seed_op)
    store_all, _ = command.plan(fwd, None, time_limit=time_limit)
    sched = schedule_of(fwd, mapping, store_all, joint)
    if isinstance(budget, float):
        return round(sched.seed_live - (1 - budget) * sched.saved_bytes), sched
    return int(sched.seed_live * float(m.group(1)) / 100), sched


def compile(model: torch.nn.Module, budget, example_inputs: Sequence, targets: Sequence = (),
            loss_fn: Callable | None = None, optimizer: str = "sgd", cost: str = "roofline:v100",
            remat: str = "auto", time_limit: float = 10.0, name: str | None = None, workspace: str = "measured",
            budget_on: str = "peak", progress: Callable[[str], None] | None = None) -> PlannedModule:
    """`model`'s training step planned by memplan under `budget` and run as planned.

    ``budget``: a fraction of the bytes store-all saves for the backward (0.5; see ``budget_bytes``),
    bytes (int), or a string memplan reads ('2GB', '40%' of the store-all arena, or with
    budget_on="saved" of store-all's bytes at the backward's seed); None plans without a budget (store-all). The
    example inputs fix the shapes the plan is for.
    ``budget_on``: "peak" (default): the budget bounds the step's whole peak; "saved": it bounds the
    bytes live at the backward's seed only (``forward_memory_graph``: the bytes saved for the backward,
    with the resident tensors and the loss), as PyTorch's activation budget does; the forward's
    transients and the backward's own memory, with what it recomputes, are then not bounded.
    The step is planned and run on the device of the model's tensors and the example inputs (one device):
    ``workspace`` and a measured ``cost`` are measured there (see ``export``), and the module refuses
    inputs on another device.
    Raises ``memplan_torch.Infeasible`` (naming the op) when no schedule fits the budget."""
    from . import meta as _meta
    from .export import ExportError, _default_loss
    if _meta.is_meta(model, tuple(example_inputs) + tuple(targets)):
        raise ExportError(f"{type(model).__name__} is on the meta device: it has no weights to train. Plan it "
                          "without them (memplan_torch.export, then `memplan plan GRAPH --budget ...`), and compile "
                          "the model built on a real device")
    loss_fn = loss_fn or _default_loss
    import time
    t0 = time.perf_counter()
    graph, joint, mapping = export_with_mapping(model, example_inputs, loss_fn, optimizer, targets, cost, name,
                                                workspace, progress)
    if progress:
        progress("planning with memplan")
    t1 = time.perf_counter()
    if budget_on not in ("peak", "saved"):
        raise ValueError(f"budget_on '{budget_on}': expected 'peak' or 'saved'")
    if budget_on == "peak":
        target, store_all = budget_bytes(graph, mapping, joint, budget, time_limit)
        planned_graph = graph
    else:
        seed_op = next((op for op, node in mapping.op_node.items() if node == joint.seed), None)
        planned_graph, room = forward_memory_graph(graph, seed_op)
        target, store_all = forward_budget_bytes(graph, mapping, joint, budget, time_limit, seed_op)
        if target is not None:
            target += room
    t2 = time.perf_counter()
    try:
        # A saved-bytes budget counts bytes, as PyTorch's does, not an arena's alignment padding (the
        # executor allocates through PyTorch and ignores offsets; a peak budget keeps the padding).
        extra = ["--alignment", "1"] if budget_on == "saved" else None
        plan, report = command.plan(planned_graph, target, remat=remat, time_limit=time_limit, extra=extra)
    except command.Infeasible as e:
        if budget_on == "peak":
            raise
        raise command.Infeasible(f"{e} (budget_on='saved': the budget bounds the bytes at the backward's seed; "
                                 f"{room} bytes of room for the rest were added to it)") from None
    t3 = time.perf_counter()
    pm = PlannedModule(model, loss_fn, len(tuple(example_inputs)), graph, joint, mapping, plan, report)
    # The budget planned for, in bytes: of the step's peak, or of the bytes at the seed (less the room).
    pm.budget_bytes = (target if budget_on == "peak" else target - room) if isinstance(target, int) else None
    pm.store_all = store_all
    pm.planned_graph = planned_graph  # what memplan planned (forward_memory_graph's for budget_on="saved")
    pm.seconds = {"export": t1 - t0, "store_all": t2 - t1, "plan": t3 - t2}
    return pm
