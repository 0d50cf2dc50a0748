"""Door 2: train in PyTorch with memplan's plan, run eagerly.

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

import operator
import time
from typing import Callable, Sequence

import torch
import torch.fx

from . import budget as _budget
from . import command
from . import device as _device
from .graph.explain import explained
from .graph.lower import Mapping
from .graph.nodes import forward_nodes, tensors_of
from .graph.schedule import Schedule, schedule_of
from .graph.step_graph import export_step, is_meta
from .step.joint import ExportError, Joint, autocast_as, autocast_state, default_loss, step_loss


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
            vals = [t for t in tensors_of(self.nodes[node].meta.get("val")) if t is not None]
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
    (saved tensors, recomputed ops, the plan's live peak and arena), ``report`` (``memplan plan --json``'s
    report: the budget as memplan resolved it, store-all's arena, what it and the plan keep for the backward),
    ``budget_on`` and ``budget_bytes`` (the budget in bytes, of the peak or of the bytes at the seed), and
    ``seconds`` (wall seconds of the export and of the plan).
    In eval mode, or without gradients, it runs the original model and returns its output."""

    def __init__(self, model, loss_fn, n_inputs, graph, joint, mapping, plan, report):
        super().__init__()
        self.model = model
        self.loss_fn = loss_fn
        self.n_inputs = n_inputs
        self.graph, self.joint, self.mapping, self.plan, self.report = graph, joint, mapping, plan, report
        self.budget_on, self.budget_bytes, self.seconds = "peak", None, {}
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


def compile(model: torch.nn.Module, budget, example_inputs: Sequence, targets: Sequence = (),
            loss_fn: Callable | str | None = None, optimizer: str = "sgd", cost: str = "roofline:v100",
            remat: str = "auto", time_limit: float = 10.0, name: str | None = None, workspace: str = "measured",
            budget_on: str = "peak", progress: Callable[[str], None] | None = None,
            on_infeasible: str = "fail") -> PlannedModule:
    """`model`'s training step planned by memplan under `budget` and run as planned.

    ``budget``: None (store-all), bytes, a size, a percentage or a fraction (of the peak: from the smallest
    peak memplan reaches, 0, to the store-all arena, 1), with the same meaning at every door (the table in
    ``memplan_torch.budget``); memplan resolves it against the store-all plan it makes. The example inputs
    fix the shapes the plan is for.
    ``budget_on``: "peak" (default): the budget bounds the step's whole peak; "saved": it bounds the bytes
    live at the backward's seed only (what is saved for the backward, with the resident tensors and the
    loss), as PyTorch's activation budget does; the forward's transients and the backward's own memory are
    then not bounded.
    The step is planned and run on the device of the model's tensors and the example inputs (one device):
    ``workspace`` and a measured ``cost`` are measured there (see ``export``), and the module refuses
    inputs on another device. One ``memplan`` process plans it.
    Raises ``memplan_torch.Infeasible`` when no schedule fits a peak budget (``NoPlan`` when none was found
    in the time limit), with the smallest peak memplan reached and the modules, shapes and dtypes live there;
    ``on_infeasible="smallest"`` plans at that smallest peak instead, with a warning."""
    wanted = _budget.read(budget, budget_on, on_infeasible)
    if is_meta(model, tuple(example_inputs) + tuple(targets)):
        raise ExportError(f"{type(model).__name__} is on the meta device: it has no weights to train. Plan it "
                          "without them (memplan_torch.export, then `memplan plan GRAPH --budget ...`), and compile "
                          "the model built on a real device")
    loss_fn = loss_fn or default_loss
    t0 = time.perf_counter()
    step = export_step(model, example_inputs, loss_fn, optimizer, targets, cost, name, workspace, progress)
    if progress:
        progress("planning with memplan")
    t1 = time.perf_counter()
    backward = {n.name for n in step.joint.gm.graph.nodes} - forward_nodes(step.joint)
    plan, report = explained(lambda: command.plan(step.graph, wanted, remat=remat, time_limit=time_limit),
                             step.mapping, step.joint.gm, backward, "the step")
    pm = PlannedModule(model, loss_fn, len(tuple(example_inputs)), step.graph, step.joint, step.mapping, plan, report)
    pm.budget_on = budget_on
    # The budget planned for, in bytes: of the step's peak, or of the bytes at the seed.
    pm.budget_bytes = report.get("budget") if wanted.arg is not None else None
    pm.seconds = {"export": t1 - t0, "plan": time.perf_counter() - t1}
    return pm
