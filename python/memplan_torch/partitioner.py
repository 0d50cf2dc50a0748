"""memplan's plan inside ``torch.compile``: a partitioner that Inductor compiles.

    import torch._inductor.config
    torch._inductor.config.custom_partitioner_fn = memplan_torch.Partitioner("8GB")
    step = torch.compile(model)        # then train as usual

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
graph's peak) keeps the plan's order there; the partitioner turns it on (``fusion_guard``).

This is the only module of memplan_torch that reaches into aot_autograd's partitioning
(``torch._functorch.partitioners._extract_fwd_bwd_modules``, ``torch._inductor.custom_graph_pass``,
private APIs): a PyTorch release that moves them breaks here.
"""
from __future__ import annotations

import dataclasses
import hashlib
import operator
import os
from typing import Any, Callable, Sequence

import torch
import torch.fx
from torch._inductor.custom_graph_pass import CustomPartitionerFn

from . import command
from .export import Joint, Mapping, _is_random, build_graph, forward_nodes
from .planned import (PHANTOM, Schedule, budget_bytes, forward_budget_bytes, forward_memory_graph, resident_at_seed,
                      schedule_of)


@dataclasses.dataclass
class Partition:
    """What one call of a Partitioner decided (``Partitioner.partitions``, one per compiled region)."""
    graph: dict             # the region's step as a memplan.graph (fused tensors at 0 bytes)
    mapping: Mapping        # how its names map onto the joint graph's nodes
    plan: dict              # memplan's plan of `planned`
    planned: dict           # the graph memplan planned: `graph`, or for budget_on="saved" forward_memory_graph's
    schedule: Schedule      # the plan as steps, with the tensors it keeps across the boundary
    budget: Any             # bytes memplan planned for: of the peak, or (budget_on="saved") live at the boundary
    saved: list             # names of the joint graph's nodes the forward module returns for the backward
    recomputed: list        # names of the joint graph's forward nodes the backward module runs again
    report: dict            # memplan plan --json's report
    seconds: dict           # wall seconds: "graph" (the memplan.graph), "plan" (memplan, budget included), "split"
    forward: torch.fx.GraphModule = None    # the modules handed to Inductor
    backward: torch.fx.GraphModule = None
    joint: Joint = None                     # the region's joint graph as memplan_torch reads it


def _source_digest() -> str:
    """A digest of memplan_torch's sources: a changed partitioner must not be served a cached compile."""
    h = hashlib.sha256()
    here = os.path.dirname(os.path.abspath(__file__))
    for name in sorted(os.listdir(here)):
        if name.endswith(".py"):
            with open(os.path.join(here, name), "rb") as f:
                h.update(name.encode() + b"\0" + f.read())
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


def _output_nodes(gm: torch.fx.GraphModule) -> list:
    out = gm.graph.output_node().args[0]
    return [a if isinstance(a, torch.fx.Node) else None for a in (out if isinstance(out, (tuple, list)) else [out])]


class Partitioner(CustomPartitionerFn):
    """A ``torch._inductor.config.custom_partitioner_fn`` that saves what memplan's plan keeps.

    ``budget_on``: "peak" (default) bounds the region's whole step, "saved" only the bytes the forward saves
    for the backward (what is live at the boundary; the forward's transients and the backward's own memory
    are not bounded, as in PyTorch's ``activation_memory_budget``). ``budget``, with "peak": bytes (int), a
    size memplan reads ('8GB', '512MiB') or a percentage of the region's store-all arena ('50%'); with
    "saved": bytes or a size of saved tensors (the region's inputs and outputs, live anyway, aside) or a
    percentage of what is live at the boundary under store-all. A fraction f in (0, 1], with either: f of the
    bytes store-all saves for the backward, the peak less the other (1 - f) of them for "peak". None:
    store-all.
    ``cost``: the cost model the plan minimises recomputation by ("roofline:DEVICE", "fused:DEVICE",
    "flops"); ``remat`` and ``time_limit`` go to ``memplan plan``. ``fusion`` (default True): the plan sees
    the step as Inductor runs it: the forward values Inductor inlines into their readers leave the graph
    (``inductor_inlined``), the backward tensors it fuses away cost no memory (``inductor_fused``), and a
    point-wise op or a scatter may write its output over a same-sized input that dies there
    (``inductor_inplace``).
    ``workspace``: "measured" (default): the temporaries of the kernels Inductor calls rather than generates
    (matrix products, convolutions, attention), each op run once alone on zero-filled inputs of its shapes
    on the region's device; "none": no workspaces. Each compiled region is planned under
    the whole budget on its own (a region's step is planned as if it were the only one: regions run one
    after the other, and what one region's caller holds is outside its graph).
    ``fusion_guard`` (default True): when neither of Inductor's fusion memory thresholds is set, the first
    call sets ``torch._inductor.config.fusion_memory_timeline_peak_memory_increase_gb = 0`` (process-wide,
    as the partitioner itself is set), so that Inductor refuses a fusion that raises the peak of the graph it
    compiles; without it a horizontal fusion can hold a recomputed tensor across the plan's steps (ResNet-50
    at f = 0.3 measured one of its largest activations above the budget).
    ``partitions`` lists what each call decided."""

    def __init__(self, budget=None, budget_on: str = "peak", cost: str = "roofline:v100", remat: str = "auto",
                 time_limit: float = 2.0, fusion: bool = True, workspace: str = "measured",
                 fusion_guard: bool = True, progress: Callable[[str], None] | None = None):
        if budget_on not in ("peak", "saved"):
            raise ValueError(f"budget_on '{budget_on}': expected 'peak' or 'saved'")
        if isinstance(budget, float) and not 0 < budget <= 1:
            raise ValueError(f"budget {budget}: a fraction must be in (0, 1]")
        from . import costs
        costs.parse(cost)
        self.budget, self.budget_on, self.cost, self.remat = budget, budget_on, cost, remat
        if workspace not in ("measured", "none"):
            raise ValueError(f"workspace '{workspace}': expected 'measured' or 'none'")
        self.time_limit, self.fusion, self.workspace, self.progress = time_limit, fusion, workspace, progress
        self.fusion_guard = fusion_guard
        self.partitions: list[Partition] = []

    def uuid(self) -> Any:
        """Inductor's cache key: the options and memplan_torch's sources (another budget is another compile)."""
        return (f"memplan_torch.Partitioner:{self.budget!r}:{self.budget_on}:{self.cost}:{self.remat}:"
                f"{self.time_limit}:{self.fusion}:{self.workspace}:{self.fusion_guard}:{_source_digest()}")

    def __call__(self, gm: torch.fx.GraphModule, joint_inputs: Sequence[object], **kwargs: Any):
        from torch._functorch.partitioners import _extract_fwd_bwd_modules
        from torch.utils._ordered_set import OrderedSet

        import time
        t0 = time.perf_counter()
        if self.fusion_guard:
            _guard_fusion()
        num_fwd_outputs = kwargs["num_fwd_outputs"]
        joint = region_joint(gm, num_fwd_outputs)
        graph, mapping = build_graph(joint, None, self.cost, "region")
        if self.workspace == "measured":
            graph = _with_workspaces(graph, mapping, gm)
        if self.fusion:
            graph = inductor_inlined(graph, mapping, gm)
        fused = inductor_fused(graph, mapping, gm) if self.fusion else []
        if self.fusion:  # pairs between tensors of equal bytes once the fused ones cost none
            graph = inductor_inplace(_zeroed(graph, fused), mapping, gm)
        t1 = time.perf_counter()
        if self.progress:
            self.progress(f"planning a compiled region ({len(graph['ops'])} ops) with memplan")
        seed_op = next((op for op, node in mapping.op_node.items() if node == joint.seed), None)
        target = self._budget(_zeroed(graph, fused), mapping, joint, seed_op)
        planned = _zeroed(graph, fused)
        room = 0
        if self.budget_on == "saved":
            planned, room = forward_memory_graph(planned, seed_op)
        extra = ["--alignment", "1"] if self.budget_on == "saved" else None
        plan, report = command.plan(planned, None if target is None else target + room, remat=self.remat,
                                    time_limit=self.time_limit, extra=extra)
        sched = schedule_of(_zeroed(graph, fused), mapping, plan, joint)
        graph = _zeroed(graph, fused)
        t2 = time.perf_counter()
        saved = self._saved_nodes(gm, joint, mapping, sched)
        placeholders = [n for n in gm.graph.nodes if n.op == "placeholder"]
        static = kwargs.get("static_lifetime_input_indices") or []
        primals = [n for n in placeholders if n.name.startswith("primals")]
        fw, bw = _extract_fwd_bwd_modules(
            gm, saved, saved_sym_nodes=self._saved_sym_nodes(gm, joint), num_fwd_outputs=num_fwd_outputs,
            static_lifetime_input_nodes=OrderedSet(primals[i] for i in static if i < len(primals)))
        _in_plan_order(bw, sched, mapping)
        fwd_names = set(forward_nodes(joint))
        recomputed = [n.name for n in bw.graph.nodes if n.op == "call_function" and n.name in fwd_names]
        self.partitions.append(Partition(graph=graph, mapping=mapping, plan=plan, planned=planned, schedule=sched, budget=target,
                                         saved=[n.name for n in saved], recomputed=recomputed, report=report,
                                         seconds={"graph": t1 - t0, "plan": t2 - t1,
                                                  "split": time.perf_counter() - t2},
                                         forward=fw, backward=bw, joint=joint))
        return fw, bw

    def _budget(self, graph: dict, mapping: Mapping, joint: Joint, seed_op):
        """The bytes memplan plans for (before forward_memory_graph's room, for a saved budget), or None."""
        budget = self.budget
        if self.budget_on == "peak":
            return budget_bytes(graph, mapping, joint, budget, self.time_limit)[0]
        if budget is None or isinstance(budget, float) or str(budget).strip().endswith("%"):
            return forward_budget_bytes(graph, mapping, joint, budget, self.time_limit, seed_op)[0]
        # Bytes saved for the backward, on top of what is live at the seed anyway (inputs, outputs).
        saved = forward_budget_bytes(graph, mapping, joint, budget, self.time_limit, seed_op)[0]
        return resident_at_seed(forward_memory_graph(graph, seed_op)[0], mapping, joint) + saved

    @staticmethod
    def _saved_nodes(gm, joint: Joint, mapping: Mapping, sched: Schedule) -> list:
        """The joint graph's nodes the forward module hands the backward: the base node of each tensor the
        plan keeps across the boundary, the forward outputs the backward reads, and the inputs (primals)
        the backward or its recomputations read."""
        by_name = {n.name: n for n in gm.graph.nodes}
        forward = forward_nodes(joint)
        keep = []
        for t in sched.saved:
            if t == PHANTOM:
                continue
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
            if n.name in forward and n.op == "call_function" and _is_random(n):
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
            if n.name in forward and isinstance(n.meta.get("val"), (torch.SymInt, torch.SymFloat, torch.SymBool)) \
                    and any(u.name not in forward for u in n.users):
                out.append(n)
        return out


def _guard_fusion() -> None:
    """Inductor's fusion memory guard on (no fusion that raises the compiled graph's estimated peak), unless
    the user set either of its thresholds; a PyTorch without the guard is left as it is."""
    import torch._inductor.config as inductor_config
    names = ("fusion_memory_timeline_peak_memory_increase_gb", "fusion_memory_timeline_peak_memory_pct_threshold")
    if all(hasattr(inductor_config, n) for n in names) and all(getattr(inductor_config, n) is None for n in names):
        inductor_config.fusion_memory_timeline_peak_memory_increase_gb = 0.0


def _with_workspaces(graph: dict, mapping: Mapping, gm: torch.fx.GraphModule) -> dict:
    """`graph` with the workspaces of the ops whose kernels Inductor does not generate (matrix products,
    convolutions, attention: oneDNN's, cuBLAS's and cuDNN's temporaries), each measured by running the op
    alone on zero-filled inputs of its shapes on the region's device (``measure.op_workspaces``).

    Where Inductor lays 2-D convolutions out channels-last (its layout optimisation, which it decides per
    graph: on the CPU whenever oneDNN runs the convolutions), a convolution's inputs are measured in that
    layout. Inductor then also copies each region input a convolution reads (a weight, the image) into
    channels-last once in the forward and hands the copy to the backward: such an input counts twice its
    bytes, for the whole step (the copy lives from its first convolution in the forward to its last in the
    backward; counting it from the start overstates the memory before that convolution, never understates)."""
    from .measure import op_workspaces

    def extern(n):
        tags = getattr(n.target, "tags", None)
        return isinstance(n.target, torch._ops.OpOverload) and tags is not None and \
            torch.Tag.pointwise not in tags and torch.Tag.reduction not in tags and not _is_random(n) and \
            not n.target.is_view
    channels_last = _inductor_channels_last(gm)

    def layout(n, a):
        v = a.meta.get("val")
        return torch.channels_last if channels_last(n) and isinstance(v, torch.Tensor) and v.dim() == 4 else None
    ws = op_workspaces(gm, extern, layout)
    copied = {a.name for n in gm.graph.nodes if n.op == "call_function" and channels_last(n)
              for a in n.all_input_nodes if a.op == "placeholder" and layout(n, a) is not None
              and not a.meta["val"].is_contiguous(memory_format=torch.channels_last)}
    twice = {t for name in copied for t in mapping.tensor_of.get(name, [])}
    ops = []
    for op in graph["ops"]:
        w = ws.get(mapping.op_node.get(op["name"]), 0)
        ops.append(dict(op, workspace=max(w, op.get("workspace", 0))) if w else op)
    tensors = [dict(t, bytes=2 * t["bytes"]) if t["name"] in twice else t for t in graph["tensors"]]
    return dict(graph, ops=ops, tensors=tensors)


def _inductor_channels_last(gm: torch.fx.GraphModule) -> Callable[[torch.fx.Node], bool]:
    """Whether Inductor runs a node of `gm` as a channels-last convolution: its layout optimisation
    (``GraphLowering.decide_layout_opt``, a private API) on for the graph, and the node a 2-D convolution or
    its backward."""
    convs = (torch.ops.aten.convolution.default, torch.ops.aten.convolution_backward.default)
    if not any(n.target in convs for n in gm.graph.nodes):
        return lambda n: False
    from torch._inductor.graph import GraphLowering
    try:
        on = GraphLowering.decide_layout_opt(gm, is_inference=False)
    except Exception:  # noqa: BLE001 - a heuristic of Inductor's that changed: measure as laid out
        on = False
    if not on:
        return lambda n: False

    def conv2d(n):
        if n.target not in convs:
            return False
        x = n.args[1] if n.target is convs[1] else n.args[0]
        v = x.meta.get("val") if isinstance(x, torch.fx.Node) else None
        return isinstance(v, torch.Tensor) and v.dim() == 4
    return conv2d


def _zeroed(graph: dict, names) -> dict:
    """`graph` with 0 bytes for the tensors `names`."""
    zero = set(names)
    if not zero:
        return graph
    return dict(graph, tensors=[dict(t, bytes=0) if t["name"] in zero else t for t in graph["tensors"]])


def inductor_fused(graph: dict, mapping: Mapping, gm: torch.fx.GraphModule) -> list:
    """The backward tensors of `graph` Inductor fuses away (never allocated). A tensor a point-wise op makes
    and only point-wise ops and reductions read is computed inside its readers' kernels (Inductor inlines
    point-wise producers into their consumers) and never allocated. A tensor the step returns, or that
    another kind of op reads (a matrix product, a convolution, attention: kernels outside Inductor's code
    generation) keeps its bytes. So does every forward tensor: a plan may keep one across the boundary (to
    recompute a reader in the backward), and Inductor allocates what the forward saves; the forward's
    transients are then counted in full, which overstates the forward's memory, never understates it."""
    by_name = {n.name: n for n in gm.graph.nodes}

    def tagged(op_name, *tags):
        node = by_name.get(mapping.op_node.get(op_name))
        have = getattr(getattr(node, "target", None), "tags", ())
        return node is not None and any(t in have for t in tags)
    producer, readers = {}, {}
    for op in graph["ops"]:
        for t in op["outputs"]:
            producer[t] = op
        for t in op["inputs"]:
            readers.setdefault(t, []).append(op)
    keep = set(graph.get("outputs", []))
    fused = []
    for t in graph["tensors"]:
        name = t["name"]
        op = producer.get(name)
        if t.get("persistent") or name in keep or op is None or not t["bytes"] or len(op["outputs"]) != 1:
            continue
        rs = readers.get(name, [])
        if rs and op["phase"] == "backward" and tagged(op["name"], torch.Tag.pointwise) and all(
                r["phase"] == "backward" and tagged(r["name"], torch.Tag.pointwise, torch.Tag.reduction) for r in rs):
            fused.append(name)
    return fused


# Point-wise ops Inductor inlines into several readers on any device (its CPU heuristic materialises a reused
# value whose expression holds an exponential, a logarithm, a sigmoid or a tanh, and a long one).
_LIGHT = frozenset(["add", "sub", "mul", "div", "neg", "where", "relu", "clamp", "clamp_min", "clamp_max",
                    "maximum", "minimum", "eq", "ne", "lt", "le", "gt", "ge", "abs", "reciprocal", "rsqrt", "sqrt",
                    "convert_element_type", "bitwise_and", "bitwise_or", "bitwise_not", "logical_not",
                    "logical_and", "logical_or"])
_INLINED_READERS = 3  # at most this many readers of a light value (Inductor's realize_reads_threshold is 4)


def inductor_inlined(graph: dict, mapping: Mapping, gm: torch.fx.GraphModule) -> dict:
    """`graph` without the forward tensors Inductor computes inside their readers' kernels: a forward
    point-wise op's only output, read only by forward point-wise ops and reductions, and by one of them,
    or by at most ``_INLINED_READERS`` when its expression (with what is inlined into it) is light. Such a
    tensor is never allocated, and a plan cannot save it for the backward without Inductor allocating it:
    its producer is merged into its readers (each reads the producer's inputs instead), so the plan
    saves those inputs or recomputes them. A merged reader keeps its own cost: the inlined point-wise
    work is memory-bound and reads what the tensor would have been made from."""
    by_name = {n.name: n for n in gm.graph.nodes}

    def node_of(op):
        return by_name.get(mapping.op_node.get(op["name"]))

    def tagged(op, *tags):
        have = getattr(getattr(node_of(op), "target", None), "tags", ())
        return any(t in have for t in tags)

    readers: dict = {}
    for op in graph["ops"]:
        for t in op["inputs"]:
            readers.setdefault(t, []).append(op)
    meta = {t["name"]: t for t in graph["tensors"]}
    fixed = set(graph.get("outputs", []))
    inlined: dict = {}   # tensor -> the tensors its readers read instead
    heavy: dict = {}
    ops = []
    for op in graph["ops"]:
        inputs = list(dict.fromkeys(x for t in op["inputs"] for x in inlined.get(t, [t])))
        op = dict(op, inputs=inputs) if inputs != op["inputs"] else op
        node = node_of(op)
        outs = op["outputs"]
        if op["phase"] == "forward" and len(outs) == 1 and node is not None and not _is_random(node) \
                and tagged(op, torch.Tag.pointwise):
            t = outs[0]
            rs = readers.get(t, [])
            packet = getattr(getattr(node.target, "overloadpacket", None), "__name__", "")
            heavy[t] = packet not in _LIGHT or any(heavy.get(x, False) for x in op["inputs"])
            if rs and t not in fixed and not meta[t].get("persistent") and all(
                    r["phase"] == "forward" and tagged(r, torch.Tag.pointwise, torch.Tag.reduction) for r in rs) \
                    and (len(rs) == 1 or (len(rs) <= _INLINED_READERS and not heavy[t])):
                inlined[t] = inputs
                continue
        ops.append(op)
    if not inlined:
        return graph
    gone = set(inlined)
    inplace_ok = lambda op: [pair for pair in op.get("inplace", []) if pair[0] not in gone]  # noqa: E731
    ops = [dict(op, inplace=inplace_ok(op)) if op.get("inplace") else op for op in ops]
    return dict(graph, ops=ops, tensors=[t for t in graph["tensors"] if t["name"] not in gone])


_SCATTERS = frozenset(["index_put", "_unsafe_index_put", "_unsafe_masked_index_put_accumulate", "index_add",
                       "index_copy", "index_fill", "scatter", "scatter_add", "scatter_reduce", "slice_scatter",
                       "select_scatter", "diagonal_scatter", "masked_scatter"])


def inductor_inplace(graph: dict, mapping: Mapping, gm: torch.fx.GraphModule) -> dict:
    """`graph` with ``inplace`` pairs on its point-wise ops: Inductor writes a point-wise kernel's output over an
    input of the same size that dies there (``config.inplace_buffers``), and a plan may do the same. So do the
    scatters (an embedding's backward, index_put, slice_scatter): Inductor copies the tensor scattered into
    and scatters into the copy, which takes the tensor's buffer when the tensor dies there."""
    by_name = {n.name: n for n in gm.graph.nodes}
    nbytes = {t["name"]: t["bytes"] for t in graph["tensors"]}
    fixed = {t["name"] for t in graph["tensors"] if t.get("persistent")} | set(graph.get("outputs", []))
    ops = []
    for op in graph["ops"]:
        node = by_name.get(mapping.op_node.get(op["name"]))
        packet = getattr(getattr(getattr(node, "target", None), "overloadpacket", None), "__name__", "")
        if packet in _SCATTERS and len(op["outputs"]) == 1 and node.args and isinstance(node.args[0], torch.fx.Node):
            y = op["outputs"][0]
            x = next((x for x in mapping.tensor_of.get(node.args[0].name, []) if x in op["inputs"]), None)
            if x is not None and x not in fixed and nbytes.get(x) == nbytes.get(y):
                op = dict(op, inplace=[[x, y]])
        elif node is not None and torch.Tag.pointwise in getattr(node.target, "tags", ()):
            pairs, used = [], set()
            for y in op["outputs"]:  # one input per output, each input for one output
                x = next((x for x in op["inputs"] if x not in fixed and x not in used and nbytes.get(x)
                          and nbytes.get(x) == nbytes.get(y)), None)
                if x is not None:
                    pairs.append([x, y])
                    used.add(x)
            if pairs:
                op = dict(op, inplace=pairs)
        ops.append(op)
    return dict(graph, ops=ops)


def _in_plan_order(bw: torch.fx.GraphModule, sched: Schedule, mapping: Mapping) -> None:
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
