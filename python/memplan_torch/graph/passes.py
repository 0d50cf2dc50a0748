"""The graph memplan plans for a compiled region, as Inductor will run it.

Inductor does not run the joint graph node for node: it inlines point-wise values into their readers, fuses
point-wise chains of the backward into one kernel, writes point-wise outputs over dying inputs, and lays
convolutions out channels-last. A plan of the joint graph as traced would save tensors Inductor never makes
and count bytes it never allocates. ``inductor_view`` applies the passes below, in order:

- ``with_workspaces``: the temporaries of the kernels Inductor calls rather than generates, measured;
- ``inductor_inlined``: forward values computed inside their readers leave the graph;
- ``inductor_fused``: backward tensors fused away cost no memory, and what they are made from lives until
  the kernel they are fused into;
- ``inductor_inplace``: point-wise ops and scatters may write over a dying input;
- ``inductor_addmm``: a backward matrix product added to a tensor is one ``addmm`` at the addition.
"""
from __future__ import annotations

from typing import Callable

import torch
import torch.fx

from .. import _compat
from ..workspaces import op_workspaces
from .lower import Mapping
from .nodes import has_tag, is_random, packet_name


SCATTERS = frozenset(["index_put", "_unsafe_index_put", "_unsafe_masked_index_put_accumulate", "index_add",
                       "index_copy", "index_fill", "scatter", "scatter_add", "scatter_reduce", "slice_scatter",
                       "select_scatter", "diagonal_scatter", "masked_scatter"])
# Scatters whose kernels Inductor generates with point-wise producers of their values inlined.
_FUSING_SCATTERS = SCATTERS | {"embedding_dense_backward"}


def inductor_view(graph: dict, mapping: Mapping, gm: torch.fx.GraphModule, fusion: bool = True,
                  workspace: str = "measured") -> dict:
    """`graph` (a compiled region's, lowered from `gm`) as Inductor runs it: with the measured workspaces of
    its library kernels (``workspace="measured"``), and with ``fusion`` its inlined values gone, its fused
    tensors at 0 bytes and its in-place pairs (found once the fused tensors cost nothing)."""
    if workspace == "measured":
        graph = with_workspaces(graph, mapping, gm)
    if fusion:
        graph = inductor_inlined(graph, mapping, gm)
        graph, addmm = inductor_addmm(graph, mapping, gm)
        graph, fused = inductor_fused(graph, mapping, gm, extern=addmm)
        graph = inductor_inplace(zeroed(graph, fused), mapping, gm, extern=addmm)
    return graph


def with_workspaces(graph: dict, mapping: Mapping, gm: torch.fx.GraphModule) -> dict:
    """`graph` with the workspaces of the ops whose kernels Inductor does not generate (matrix products,
    convolutions, attention: oneDNN's, cuBLAS's and cuDNN's temporaries), each measured by running the op
    alone on zero-filled inputs of its shapes on the region's device (``measure.op_workspaces``).

    Where Inductor lays 2-D convolutions out channels-last (its layout optimisation, which it decides per
    graph: on the CPU whenever oneDNN runs the convolutions), a convolution's inputs are measured in that
    layout. Inductor then also copies each region input a convolution reads (a weight, the image) into
    channels-last once in the forward and hands the copy to the backward: such an input counts twice its
    bytes, for the whole step (the copy lives from its first convolution in the forward to its last in the
    backward; counting it from the start overstates the memory before that convolution, never understates)."""
    def extern(n):
        tags = getattr(n.target, "tags", None)
        return _compat.is_op_overload(n.target) and tags is not None and \
            torch.Tag.pointwise not in tags and torch.Tag.reduction not in tags and not is_random(n) and \
            not n.target.is_view
    channels_last = _channels_last_convolutions(gm)

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


def _channels_last_convolutions(gm: torch.fx.GraphModule) -> Callable[[torch.fx.Node], bool]:
    """Whether Inductor runs a node of `gm` as a channels-last convolution: its layout optimisation on for the
    graph, and the node a 2-D convolution or its backward."""
    convs = (torch.ops.aten.convolution.default, torch.ops.aten.convolution_backward.default)
    if not any(n.target in convs for n in gm.graph.nodes) or not _compat.inductor_lays_out_channels_last(gm):
        return lambda n: False

    def conv2d(n):
        if n.target not in convs:
            return False
        x = n.args[1] if n.target is convs[1] else n.args[0]
        v = x.meta.get("val") if isinstance(x, torch.fx.Node) else None
        return isinstance(v, torch.Tensor) and v.dim() == 4
    return conv2d


def zeroed(graph: dict, names) -> dict:
    """`graph` with 0 bytes for the tensors `names`."""
    zero = set(names)
    if not zero:
        return graph
    return dict(graph, tensors=[dict(t, bytes=0) if t["name"] in zero else t for t in graph["tensors"]])


def inductor_fused(graph: dict, mapping: Mapping, gm: torch.fx.GraphModule, extern=frozenset()) -> tuple[dict, list]:
    """The backward tensors of `graph` Inductor fuses away (never allocated), and `graph` with their producers'
    inputs read by their readers. A tensor a point-wise op makes and only point-wise ops, reductions and
    scatters (an embedding's backward, index_put) read is computed inside its readers' kernels (Inductor
    inlines point-wise producers into their consumers) and never allocated; the producer's inputs are then
    read by the readers' kernel, so they live until it runs, beside its output (each reader reads them
    too). A tensor the step returns, or that another kind of op reads (a matrix product, a convolution,
    attention: kernels outside Inductor's code generation) keeps its bytes. So does every forward tensor: a
    plan may keep one across the boundary (to recompute a reader in the backward), and Inductor allocates
    what the forward saves; the forward's transients are then counted in full, which overstates the
    forward's memory, never understates it. The ops named in `extern` run as library kernels whatever their
    node says (``inductor_addmm``'s)."""
    by_name = {n.name: n for n in gm.graph.nodes}

    def node_of(op):
        return None if op["name"] in extern else by_name.get(mapping.op_node.get(op["name"]))

    def fuses(op):  # a backward kernel Inductor generates, into which point-wise producers are inlined
        node = node_of(op)
        return op["phase"] == "backward" and (has_tag(node, torch.Tag.pointwise, torch.Tag.reduction)
                                              or packet_name(node) in _FUSING_SCATTERS)
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
        if rs and op["phase"] == "backward" and has_tag(node_of(op), torch.Tag.pointwise) and all(fuses(r) for r in rs):
            fused.append(name)
    if not fused:
        return graph, fused
    inputs_of: dict = {}  # fused tensor -> what its producer reads, fused tensors resolved
    gone = set(fused)
    ops = []
    for op in graph["ops"]:
        extra = [x for t in op["inputs"] if t in inputs_of for x in inputs_of[t]]
        ins = list(dict.fromkeys(op["inputs"] + extra))
        if len(ins) != len(op["inputs"]):
            op = dict(op, inputs=ins)
        for t in op["outputs"]:
            if t in gone:
                inputs_of[t] = [x for x in ins if x not in gone]
        ops.append(op)
    return dict(graph, ops=ops), fused


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
        return has_tag(node_of(op), *tags)

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
        if op["phase"] == "forward" and len(outs) == 1 and node is not None and not is_random(node) \
                and tagged(op, torch.Tag.pointwise):
            t = outs[0]
            rs = readers.get(t, [])
            heavy[t] = packet_name(node) not in _LIGHT or any(heavy.get(x, False) for x in op["inputs"])
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




def inductor_inplace(graph: dict, mapping: Mapping, gm: torch.fx.GraphModule, extern=frozenset()) -> dict:
    """`graph` with ``inplace`` pairs on its point-wise ops: Inductor writes a point-wise kernel's output over an
    input of the same size that dies there (``config.inplace_buffers``), and a plan may do the same. So do the
    scatters (an embedding's backward, index_put, slice_scatter): Inductor copies the tensor scattered into
    and scatters into the copy, which takes the tensor's buffer when the tensor dies there. The ops named in
    `extern` (``inductor_addmm``'s) write a new buffer."""
    by_name = {n.name: n for n in gm.graph.nodes}
    nbytes = {t["name"]: t["bytes"] for t in graph["tensors"]}
    fixed = {t["name"] for t in graph["tensors"] if t.get("persistent")} | set(graph.get("outputs", []))
    ops = []
    for op in graph["ops"]:
        if op["name"] in extern:
            ops.append(op)
            continue
        node = by_name.get(mapping.op_node.get(op["name"]))
        if packet_name(node) in SCATTERS and len(op["outputs"]) == 1 and node.args and isinstance(node.args[0], torch.fx.Node):
            y = op["outputs"][0]
            x = next((x for x in mapping.tensor_of.get(node.args[0].name, []) if x in op["inputs"]), None)
            if x is not None and x not in fixed and nbytes.get(x) == nbytes.get(y):
                op = dict(op, inplace=[[x, y]])
        elif has_tag(node, torch.Tag.pointwise):
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


def inductor_addmm(graph: dict, mapping: Mapping, gm: torch.fx.GraphModule) -> tuple[dict, set]:
    """`graph` with each backward ``add(mm(a, b), c)`` as Inductor runs it: its post-grad pattern rewrites it
    to ``addmm(c, a, b)`` when the product has no other reader and c is a tensor of its dtype that expands
    to its shape (a weight used twice, as tied embeddings are, sums two gradients so), and the product then
    runs where the addition is, after c exists: a and b live until then, and the product's own output is
    never allocated. The two ops become one at the addition (the product's inputs, both costs, the larger
    workspace); its output is allocated (addmm writes a new buffer, never in place), which is what the
    other passes are told by the names of the merged ops, returned beside the graph."""
    by_name = {n.name: n for n in gm.graph.nodes}
    meta = {t["name"]: t for t in graph["tensors"]}
    producer, readers = {}, {}
    for op in graph["ops"]:
        for t in op["outputs"]:
            producer[t] = op
        for t in op["inputs"]:
            readers[t] = readers.get(t, 0) + 1
    merged: dict = {}  # add op name -> the mm op merged into it
    for op in graph["ops"]:
        node = by_name.get(mapping.op_node.get(op["name"]))
        if op["phase"] != "backward" or packet_name(node) != "add" or len(node.args) != 2 or len(op["outputs"]) != 1:
            continue
        args = [a for a in node.args if isinstance(a, torch.fx.Node)]
        mms = [a for a in args if packet_name(a) == "mm" and len(a.users) == 1]
        if len(args) != 2 or not mms:
            continue
        mm, other = mms[0], next(a for a in args if a is not mms[0])
        v, w = mm.meta.get("val"), other.meta.get("val")
        if not (isinstance(v, torch.Tensor) and isinstance(w, torch.Tensor)) or v.dtype != w.dtype or \
                w.dim() > v.dim() or any(a not in (1, b) for a, b in zip(w.shape[::-1], v.shape[::-1])):
            continue
        outs = mapping.tensor_of.get(mm.name, [])
        m_op = producer.get(outs[0]) if len(outs) == 1 else None
        if m_op is None or m_op["phase"] != "backward" or readers.get(outs[0]) != 1 or outs[0] not in op["inputs"]:
            continue
        merged[op["name"]] = m_op
    if not merged:
        return graph, set()
    gone_ops = {m["name"] for m in merged.values()}
    gone = {t for m in merged.values() for t in m["outputs"]}
    ops = []
    for op in graph["ops"]:
        if op["name"] in gone_ops:
            continue
        m = merged.get(op["name"])
        if m is not None:
            op = dict(op)
            op["inputs"] = list(dict.fromkeys(m["inputs"] + [t for t in op["inputs"] if t not in gone]))
            op["cost"] = op.get("cost", 0.0) + m.get("cost", 0.0)
            op["flops"] = op.get("flops", 0.0) + m.get("flops", 0.0)
            work = max(op.get("workspace", 0), m.get("workspace", 0))
            if work:
                op["workspace"] = work
        ops.append(op)
    return dict(graph, ops=ops, tensors=[t for t in graph["tensors"] if t["name"] not in gone]), set(merged)
