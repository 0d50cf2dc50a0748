"""Door 3: memplan's plan inside ``torch.compile``, a partitioner that Inductor compiles. Set it as
Inductor's ``custom_partitioner_fn`` (its configuration module's, as docs/torch.md shows), then
``torch.compile`` the step and train as usual.

aot_autograd traces the forward and the backward of each compiled region into one joint graph and asks
a partitioner which of the forward's tensors to save for the backward; the backward recomputes the rest.
PyTorch's own (the min-cut partitioner, with ``activation_memory_budget`` choosing by a knapsack over
saved bytes) decides on bytes saved; ``Partitioner`` asks memplan for a plan of the region's step under a
budget on its peak (or on what is saved) and saves exactly the forward tensors the plan keeps across the
boundary. The joint graph becomes a memplan.graph through the export's own ``build_graph`` (the
region's inputs are persistent, each tangent is made by a zero-cost op at the start of the backward, no
optimizer: it runs outside the compiled graph). A random op is never recomputed where a second run would
draw another mask: Inductor replaces dropout's draws by ``inductor_random`` from seeds drawn once per step
(``inductor_seeds``), which a recomputation reproduces, but with ``fallback_random`` the joint graph holds
ATen's random ops. The outputs of the ops that draw (``inductor_seeds``, or ATen's random ops) are kept to
the end of the step in the graph memplan plans (a little more memory than needed, never less).

The backward module is handed to Inductor in the plan's order (each recomputation just before the step
that needs it); Inductor's scheduler then fuses point-wise chains and may reorder. A forward point-wise
value Inductor inlines into its readers leaves the graph memplan plans (``inductor_inlined``: its readers
read its producer's inputs, so no plan saves it), a backward tensor Inductor fuses away costs nothing
(``inductor_fused``), point-wise ops and scatters may write over a dying input (``inductor_inplace``),
and where Inductor runs convolutions channels-last their workspaces are measured so and the inputs it
copies count twice (``_with_workspaces``). Inductor's horizontal fusion merges kernels up to 64 nodes
apart that read the same buffers; in a backward that recomputes, that pulls a later recomputation up to
an earlier one and holds its output in between. Inductor's own fusion guard
(``fusion_memory_timeline_peak_memory_increase_gb = 0``: no fusion that raises its estimate of the
graph's peak) keeps the plan's order there; the partitioner turns it on (``fusion_guard``). Inductor's buffer
pool (``allow_buffer_reuse``) keeps a dead buffer allocated until a later allocation of its size takes it,
when that does not raise Inductor's own estimate of the graph's peak, an estimate without the workspaces of
the library kernels it calls: a held buffer can pass the plan's peak there. The partitioner turns the pool
off (``pool_guard``), and frees each buffer where the plan frees it.

aot_autograd's split of a joint graph and Inductor's partitioner interface are private PyTorch names,
reached through ``_compat``; the graph passes are ``graph.passes``.
"""
from __future__ import annotations

import dataclasses
import hashlib
import operator
import pathlib
import time
from typing import Any, Callable, Sequence

import torch
import torch.fx

from . import _compat
from . import budget as _budget
from . import command
from . import costs
from . import probe
from . import regions
from .graph.explain import explained
from .graph.lower import Mapping, build_graph
from .graph.nodes import forward_nodes, is_random, tensors_of
from .graph.passes import inductor_view
from .graph.schedule import Schedule, backward_in_plan_order, schedule_of
from .step.joint import Joint


@dataclasses.dataclass
class Partition:
    """What one call of a Partitioner decided (``Partitioner.partitions``, one per compiled region)."""
    graph: dict             # the region's step as a memplan.graph, as Inductor runs it (graph.passes)
    mapping: Mapping        # how its names map onto the joint graph's nodes
    plan: dict              # memplan's plan of `graph` (for budget_on="saved", of its boundary memory graph)
    budget_on: str          # what the budget bounds: "peak" or "saved"
    schedule: Schedule      # the plan as steps, with the tensors it keeps across the boundary
    budget: Any             # bytes memplan planned for: of the peak, or (budget_on="saved") live at the boundary
    saved: list             # names of the joint graph's nodes the forward module returns for the backward
    recomputed: list        # names of the joint graph's forward nodes the backward module runs again
    report: dict            # memplan plan --json's report
    seconds: dict           # wall seconds: "graph" (the memplan.graph), "plan" (memplan), "split"
    forward: torch.fx.GraphModule = None    # the modules handed to Inductor
    backward: torch.fx.GraphModule = None
    joint: Joint = None                     # the region's joint graph as memplan_torch reads it


def source_digest(root: str | pathlib.Path | None = None) -> str:
    """A digest of every Python source of the package at `root` (default: this one), subfolders included,
    by relative path and content: a changed partitioner (or anything it runs) is not served a cached
    compile."""
    root = pathlib.Path(root) if root is not None else pathlib.Path(__file__).resolve().parent
    h = hashlib.sha256()
    for path in sorted(root.rglob("*.py")):
        h.update(path.relative_to(root).as_posix().encode() + b"\0" + path.read_bytes() + b"\0")
    return h.hexdigest()


def region_joint(gm: torch.fx.GraphModule, num_fwd_outputs: int) -> Joint:
    """The joint graph aot_autograd hands a partitioner as a Joint: primals are the region's inputs (held by
    the caller for the whole step), tangents what autograd passes to the backward, the first
    `num_fwd_outputs` outputs the forward's and the rest the gradients."""
    placeholders = [n for n in gm.graph.nodes if n.op == "placeholder"]
    outputs = _output_nodes(gm)
    fwd = [n.name for n in outputs[:num_fwd_outputs] if n is not None]
    if not fwd:
        raise ValueError("the joint graph has no forward output")
    tangents = [n.name for n in placeholders if n.name.startswith("tangents")]
    return Joint(gm=gm, params={}, buffers={}, inputs=[n.name for n in placeholders if n.name not in tangents],
                 loss=fwd[0], seed=tangents[0] if tangents else None, mutations={}, grads={}, param_tensors={},
                 buffer_tensors={}, forward_roots=fwd, outputs=[n.name for n in outputs if n is not None],
                 tangents=tangents, recompute_random=False)


def region_key(gm: torch.fx.GraphModule, num_fwd_outputs: int) -> str:
    """A digest of a joint graph (its code and its inputs' shapes, strides and dtypes): the same region
    compiled again has the same key."""
    h = hashlib.sha256(f"{num_fwd_outputs}\n{gm.code}".encode())
    for n in gm.graph.nodes:
        v = n.meta.get("val")
        if n.op == "placeholder":
            h.update(f"{n.name}:{getattr(v, 'shape', v)}:{getattr(v, 'dtype', '')}:"
                     f"{v.stride() if isinstance(v, torch.Tensor) else ''}\n".encode())
    return h.hexdigest()


def _output_nodes(gm: torch.fx.GraphModule) -> list:
    out = gm.graph.output_node().args[0]
    return [a if isinstance(a, torch.fx.Node) else None for a in (out if isinstance(out, (tuple, list)) else [out])]


class Partitioner(_compat.partitioner_base()):
    """Inductor's ``custom_partitioner_fn``: saves for the backward what memplan's plan keeps.

    ``budget`` and ``budget_on``: as ``compile``'s (the table in ``memplan_torch.budget``), of the region's
    step: "peak" (default) bounds the region's whole step, "saved" only what the forward saves for the
    backward (the forward's transients and the backward's own memory are not bounded, as in PyTorch's
    ``activation_memory_budget``). A fraction f of a peak budget goes from the smallest peak memplan reaches
    for the region (0) to its store-all arena (1) and is met at every f; under "saved" it is PyTorch's
    meaning. None: store-all. One ``memplan`` process plans each region.
    ``on_infeasible``: "fail" (default): a peak budget no plan meets raises ``Infeasible`` (``NoPlan`` when
    none was found in the time limit) with the smallest peak memplan reached and the modules, shapes and
    dtypes live there; "smallest": the region trains at that smallest peak, with a warning.
    ``cost``: the cost model the plan minimises recomputation by ("roofline:DEVICE", "fused:DEVICE",
    "flops"); ``remat`` and ``time_limit`` go to ``memplan plan`` (``time_limit`` None, the default: 2 s, more
    on a region of more than 800 ops, ``command.seconds_for``). ``fusion`` (default True): the plan sees
    the step as Inductor runs it: the forward values Inductor inlines into their readers leave the graph
    (``inductor_inlined``), the backward tensors it fuses away cost no memory (``inductor_fused``), and a
    point-wise op or a scatter may write its output over a same-sized input that dies there
    (``inductor_inplace``).
    ``workspace``: "measured" (default): the temporaries of the kernels Inductor calls rather than generates
    (matrix products, convolutions, attention), each op run once alone on zero-filled inputs of its shapes
    on the region's device; "none": no workspaces. A step of several compiled regions
    (graph breaks, blocks compiled one by one): ``fit`` makes the budget bound the whole step, each region
    with its own plan; without it each region is planned under the whole budget on its own (as if it were
    the only one: what the other regions keep is outside its graph).
    ``fusion_guard`` (default True): when neither of Inductor's fusion memory thresholds is set, the first
    call sets Inductor's ``fusion_memory_timeline_peak_memory_increase_gb = 0`` (process-wide,
    as the partitioner itself is set), so that Inductor refuses a fusion that raises the peak of the graph it
    compiles; without it a horizontal fusion can hold a recomputed tensor across the plan's steps (ResNet-50
    at f = 0.3 measured one of its largest activations above the budget).
    With dynamic shapes (``torch.compile(..., dynamic=True)``) a region is planned at the sizes Dynamo traced,
    and its one partition serves every size; ``peak_at`` says what that partition holds at another size.
    ``pool_guard`` (default True): the first call turns Inductor's buffer pool off (``allow_buffer_reuse =
    False``, process-wide, as its lite mode has it): the generated code frees a dead buffer rather than keep it
    for a later allocation of its size, so what is live is what the plan has live. With the pool (``False``)
    a held buffer can raise the peak above the plan's (by up to 1 MiB on the compile coverage's models, where
    Inductor's estimate of the peak leaves out a library kernel's workspace); the pool's time is measured in
    bench/torch/buffer_pool.py.
    ``partitions`` lists what each call decided."""

    def __init__(self, budget=None, budget_on: str = "peak", cost: str = "roofline:v100", remat: str = "auto",
                 time_limit: float | None = None, fusion: bool = True, workspace: str = "measured",
                 fusion_guard: bool = True, progress: Callable[[str], None] | None = None,
                 on_infeasible: str = "fail", pool_guard: bool = True):
        self.wanted = _budget.read(budget, budget_on, on_infeasible)
        self.on_infeasible = on_infeasible
        costs.parse(cost)
        self.budget, self.budget_on, self.cost, self.remat = budget, budget_on, cost, remat
        if workspace not in ("measured", "none"):
            raise ValueError(f"workspace '{workspace}': expected 'measured' or 'none'")
        if time_limit is not None and not (isinstance(time_limit, (int, float)) and 0 < time_limit < float("inf")):
            raise ValueError(f"time_limit {time_limit!r}: expected seconds above 0, or None for the default")
        self.time_limit, self.fusion, self.workspace, self.progress = time_limit, fusion, workspace, progress
        self.fusion_guard, self.pool_guard = fusion_guard, pool_guard
        self.partitions: list[Partition] = []
        self.step_plan: regions.StepPlan | None = None   # what fit decided, None before it
        self._assigned: dict = {}       # region key -> (graph, mapping, plan, report) of the step's budget
        self._recording: list | None = None
        self._step_tag = ""             # in the cache key: fit's plans (or its recording) are other compiles

    def uuid(self) -> Any:
        """Inductor's cache key: the options and memplan_torch's sources (another budget is another compile)."""
        return (f"memplan_torch.Partitioner:{self.budget!r}:{self.budget_on}:{self.cost}:{self.remat}:"
                f"{self.time_limit}:{self.fusion}:{self.workspace}:{self.fusion_guard}:{self.pool_guard}:"
                f"{self.on_infeasible}:"
                f"{source_digest()}:{self._step_tag}")

    def __call__(self, gm: torch.fx.GraphModule, joint_inputs: Sequence[object], **kwargs: Any):
        t0 = time.perf_counter()
        if self.fusion_guard:
            _compat.guard_fusion_memory()
        if self.pool_guard:
            _compat.guard_buffer_pool()
        num_fwd_outputs = kwargs["num_fwd_outputs"]
        joint = region_joint(gm, num_fwd_outputs)
        placeholders = [n for n in gm.graph.nodes if n.op == "placeholder"]
        static = kwargs.get("static_lifetime_input_indices") or []
        primals = [n for n in placeholders if n.name.startswith("primals")]
        key = region_key(gm, num_fwd_outputs)
        assigned = self._assigned.get(key)
        if assigned is not None:  # a plan of the step's budget (fit)
            graph, mapping, plan, report = assigned
        else:
            graph, mapping = self._region_graph(joint)
        t1 = time.perf_counter()
        if assigned is None:
            if self.progress:
                self.progress(f"planning a compiled region ({len(graph['ops'])} ops) with memplan")
            backward = {n.name for n in gm.graph.nodes} - forward_nodes(joint)
            wanted = _budget.read(None) if self._recording is not None else self.wanted
            plan, report = explained(
                lambda: command.plan(graph, wanted, remat=self.remat, time_limit=self.time_limit),
                mapping, gm, backward, "a compiled region")
            if self._recording is not None:
                weights = [primals[i] for i in static if i < len(primals)]
                grads = _output_nodes(gm)[num_fwd_outputs:]
                grads = [g.name for p, g in zip(primals, grads) if p in weights and g is not None] \
                    if len(grads) == len(primals) else []
                self._recording.append(regions.Record(key, joint, graph, mapping, {p.name for p in weights},
                                                      set(grads)))
        sched = schedule_of(graph, mapping, plan, joint)
        t2 = time.perf_counter()
        saved = self._saved_nodes(gm, joint, mapping, sched)
        fw, bw = _compat.split_joint(gm, saved, self._saved_sym_nodes(gm, joint), num_fwd_outputs,
                                     [primals[i] for i in static if i < len(primals)])
        backward_in_plan_order(bw, sched, mapping)
        fwd_names = set(forward_nodes(joint))
        recomputed = [n.name for n in bw.graph.nodes if n.op == "call_function" and n.name in fwd_names]
        self.partitions.append(Partition(graph=graph, mapping=mapping, plan=plan, budget_on=self.budget_on,
                                         schedule=sched, budget=report.get("budget"), saved=[n.name for n in saved],
                                         recomputed=recomputed, report=report,
                                         seconds={"graph": t1 - t0, "plan": t2 - t1,
                                                  "split": time.perf_counter() - t2},
                                         forward=fw, backward=bw, joint=joint))
        return fw, bw

    def fit(self, model: torch.nn.Module, loss_fn: Callable, *args) -> regions.StepPlan:
        """Makes the budget bound the whole step when the step is several compiled regions (graph breaks, or
        blocks compiled one by one). ``loss_fn(model, *args)`` is the step's forward (it returns the loss;
        ``fit`` runs the backward); the compiled code it runs is compiled with this partitioner set.

        ``fit`` drops every compiled code (``torch.compiler.reset()``) and runs the step twice with every
        region's store-all plan: the first call compiles the regions (each seen by this partitioner), the
        second is measured (the allocator's peak on the model's device) and tells how many times and in
        which order each region runs. Each region is then planned at a few budgets (regions.region_of), the
        plans that together fit the step's budget at the least recomputation are chosen (regions.divide:
        what the earlier regions keep and the later ones' gradients count against each region), and the
        compiled code is dropped again: the next call compiles every region with its chosen plan. The step's
        budget is the partitioner's: bytes or a size (the step's peak: the weights, buffers and inputs
        already there and what the step makes, the gradients included; ``fit`` sets the gradients to None
        while it runs and puts them back), a percentage of the measured store-all peak, or a fraction f
        from the smallest step peak the plans reach (0) to the store-all peak (1). A region compiled later
        that ``fit`` did not see (another shape) is planned alone under the whole budget. Returns what was
        decided (also ``step_plan``)."""
        if self.budget_on != "peak" or self.wanted.arg is None:
            raise ValueError("Partitioner.fit: the step's budget bounds its peak; give the partitioner a peak "
                             "budget (not None, not budget_on='saved')")
        params = list(model.parameters())
        # The step's tensor arguments, in tuples and lists too (a batch of inputs and targets).
        tensors = [a for a in tensors_of(list(args)) if a is not None]
        device = params[0].device if params else next((a.device for a in tensors), torch.device("cpu"))
        grads = [p.grad for p in params]
        resident = probe.storage_bytes(params + list(model.buffers()) + tensors)
        runs: list = []

        def step():
            loss = loss_fn(model, *args)
            if not isinstance(loss, torch.Tensor) or loss.grad_fn is None:
                raise ValueError("Partitioner.fit: loss_fn returned no tensor with a gradient to train")
            runs[:] = _compat.compiled_region_runs(loss)
            loss.backward()

        def compiled_and_measured() -> int:
            torch.compiler.reset()
            try:
                for p in params:
                    p.grad = None
                step()                  # compiles every region
                for p in params:
                    p.grad = None
                return probe.measure_step(step, resident, device).peak
            finally:
                for p, g in zip(params, grads):
                    p.grad = g

        self._assigned, self._recording = {}, []
        self._step_tag = f"recording:{id(self)}:{time.time_ns()}"
        try:
            store_all = compiled_and_measured()   # every region with its store-all plan
            records = self._recording
        finally:
            self._recording = None
        order = list(dict.fromkeys(runs))
        if len(order) != len(records):
            raise RuntimeError(f"Partitioner.fit: the step ran {len(order)} compiled region(s) with a backward "
                               f"but {len(records)} were compiled with this partitioner")
        if self.progress:
            self.progress(f"planning the step's {len(records)} compiled region(s) at a few budgets each")
        found = regions.regions_of(records, self.remat, self.time_limit)

        def assign(choice) -> None:
            self._assigned = {rec.key: (rec.graph, rec.mapping, region.candidates[c].plan,
                                        region.candidates[c].report)
                              for rec, region, c in zip(records, found, choice)}
            self._step_tag = "step:" + ",".join(f"{rec.key[:16]}={c}" for rec, c in zip(records, choice))

        def measure(choice) -> int:
            if self.progress:
                self.progress("compiling and measuring the step with the plans " +
                              ", ".join(found[k].candidates[c].budget for k, c in enumerate(choice)))
            assign(choice)
            return compiled_and_measured()

        def plan_at(k: int, peak: int):
            return regions.candidate_at(records[k], found[k], str(int(peak)), "peak", self.remat, self.time_limit)

        choice, self.step_plan = regions.divide(found, [order.index(c) for c in runs], resident, self.wanted,
                                                measure, store_all, plan_at=plan_at)
        assign(choice)
        self.partitions.clear()
        torch.compiler.reset()
        return self.step_plan

    def _region_graph(self, joint: Joint) -> tuple[dict, Mapping]:
        """The region's step as a memplan.graph, as Inductor runs it (graph.passes), and its mapping."""
        graph, mapping = build_graph(joint, None, self.cost, "region")
        return inductor_view(graph, mapping, joint.gm, fusion=self.fusion, workspace=self.workspace), mapping

    def peak_at(self, partition: Partition, sizes: dict) -> int:
        """The live peak, in bytes, of `partition`'s plan (the same steps: what it keeps, what it recomputes) on
        its region at other sizes: `sizes` maps Dynamo's size symbols to values ({"s0": 80}; the symbols of the
        region's symbolic placeholders, ``Partition.joint.gm``). The region was planned at the sizes Dynamo
        traced (dynamic shapes, docs/torch.md); this is what the same partition holds at another size."""
        with _compat.sizes_at(sizes):
            graph, mapping = self._region_graph(partition.joint)
        return schedule_of(graph, mapping, partition.plan, partition.joint).live_peak

    @staticmethod
    def _saved_nodes(gm, joint: Joint, mapping: Mapping, sched: Schedule) -> list:
        """The joint graph's nodes the forward module hands the backward: the base node of each tensor the
        plan keeps across the boundary, the forward outputs the backward reads, and the inputs (primals)
        the backward or its recomputations read."""
        by_name = {n.name: n for n in gm.graph.nodes}
        forward = forward_nodes(joint)
        keep = []
        for t in sched.saved:
            base = next((by_name[m] for m in mapping.members[t] if by_name[m].op == "call_function"), None)
            # An output of a forward op only the backward reads (attention's log-sum-exp) is not itself an
            # ancestor of the forward's outputs: its producer is.
            made = base.args[0] if base is not None and base.target is operator.getitem else base
            if made is not None and made.name in forward:
                keep.append(base)
        # What the step returns lives anyway; the backward reads it from the forward's outputs.
        returned = set(joint.forward_roots)
        keep += [by_name[k] for k in joint.forward_roots if by_name[k].op == "call_function"
                 and any(u.name not in forward for u in by_name[k].users)]
        # A random forward op is never recomputed (build_graph kept its outputs to the end): they are saved.
        for n in gm.graph.nodes:
            if n.name in forward and n.op == "call_function" and is_random(n):
                outs = [u for u in n.users if u.target is operator.getitem] \
                    if isinstance(n.meta.get("val"), (tuple, list)) else [n]
                keep += [o for o in outs if any(u.name not in forward for u in o.users)]
        kept = set(n.name for n in keep) | returned
        # Inputs the backward reaches without passing through a kept node.
        seen, stack, inputs = set(), [a for a in _output_nodes(gm)[len(joint.forward_roots):] if a is not None], []
        while stack:
            n = stack.pop()
            if n.name in seen or n.name in kept or n.name in joint.tangents:
                continue
            seen.add(n.name)
            if n.op == "placeholder":
                if isinstance(n.meta.get("val"), torch.Tensor):  # a symbolic size goes as a sym node
                    inputs.append(n)
                continue
            stack.extend(n.all_input_nodes)
        order = {n.name: i for i, n in enumerate(gm.graph.nodes)}
        return sorted(dict.fromkeys(inputs + keep), key=lambda n: order[n.name])

    @staticmethod
    def _saved_sym_nodes(gm, joint: Joint) -> list:
        """Forward symbolic sizes the backward reads (dynamic shapes), as PyTorch's partitioners save them."""
        forward = forward_nodes(joint)
        out = []
        for n in gm.graph.nodes:
            if (n.name in forward or n.op == "placeholder") and _compat.is_symbolic(n.meta.get("val")) \
                    and any(u.name not in forward for u in n.users):
                out.append(n)
        return out


