"""What a node of a joint graph is, read off its fake values and its ATen op: the tensors and storages it
holds, whether it draws random numbers or writes in place, the work the cost models price, and which nodes
are the forward's."""
from __future__ import annotations

import torch
import torch.fx
from torch.multiprocessing.reductions import StorageWeakRef
from torch.utils.flop_counter import FlopCounterMode, flop_registry

from .. import _compat
from .. import costs
from ..step.joint import Joint


def tensors_of(val) -> list:
    """The tensors (or None) of a node's value, flattened: a tensor, or a tuple/list of them."""
    if isinstance(val, torch.Tensor):
        return [val]
    if isinstance(val, (tuple, list)):
        out = []
        for v in val:
            out.extend(tensors_of(v) if isinstance(v, (tuple, list)) else [v if isinstance(v, torch.Tensor) else None])
        return out
    return []


def storage_key(t: torch.Tensor):
    """A key equal for tensors that share a storage (a view and its base)."""
    return StorageWeakRef(t.untyped_storage()).cdata


def storage_bytes(t: torch.Tensor) -> int:
    """The bytes of `t`'s storage; with symbolic sizes (dynamic shapes), at the sizes Dynamo traced."""
    return _compat.size_hint(t.untyped_storage().nbytes())


def numel(t: torch.Tensor) -> int:
    return _compat.size_hint(t.numel())


def view_bytes(t: torch.Tensor) -> int:
    return min(numel(t) * t.element_size(), storage_bytes(t))


def is_random(n: torch.fx.Node) -> bool:
    """Whether the op draws from a generator: tagged so, unless its only randomness is a dropout probability
    of 0 (scaled_dot_product_attention's forms are tagged for their dropout_p)."""
    if torch.Tag.nondeterministic_seeded not in getattr(n.target, "tags", ()):
        return False
    schema = _compat.op_schema(n.target)
    names = [a.name for a in schema.arguments] if schema is not None else []
    if "dropout_p" not in names:
        return True
    i = names.index("dropout_p")
    p = n.args[i] if i < len(n.args) else n.kwargs.get("dropout_p", schema.arguments[i].default_value)
    return not isinstance(p, (int, float)) or p != 0


def is_inplace(n: torch.fx.Node) -> bool:
    schema = _compat.op_schema(n.target)
    if schema is None:
        return False
    return any(a.alias_info is not None and a.alias_info.is_write for a in schema.arguments)


def packet_name(n) -> str:
    """The ATen op's name without overload ('add' for aten.add.Tensor), or '' for other nodes."""
    return getattr(getattr(getattr(n, "target", None), "overloadpacket", None), "__name__", "")


def has_tag(n, *tags) -> bool:
    """Whether node `n` is an ATen op carrying any of `tags` (torch.Tag.pointwise, ...)."""
    have = getattr(getattr(n, "target", None), "tags", ())
    return n is not None and any(t in have for t in tags)


def _kind_and_flops(n: torch.fx.Node, out_tensors: list) -> tuple[str, float]:
    """The op's compute kind and FLOPs: PyTorch's flop counter on meta copies of its inputs;
    ops it does not count (point-wise, reductions, copies) do one flop per output element."""

    def meta(v):
        if isinstance(v, torch.fx.Node):
            v = v.meta.get("val")
        if isinstance(v, torch.Tensor):
            return torch.empty_strided(*_compat.hinted_shape(v), dtype=v.dtype, device="meta")
        if _compat.is_symbolic(v):
            return _compat.size_hint(v) if isinstance(v, torch.SymInt) else v
        if isinstance(v, (list, tuple)):
            return type(v)(meta(x) for x in v)
        return v

    flops = 0
    if getattr(n.target, "overloadpacket", None) in flop_registry:
        try:
            counter = FlopCounterMode(display=False)
            with counter:
                n.target(*meta(list(n.args)), **{k: meta(v) for k, v in n.kwargs.items()})
            flops = counter.get_total_flops()
        except Exception:  # noqa: BLE001 - a formula that does not take these arguments: priced as other ops
            flops = 0
    if flops > 0:
        return costs.MATMUL, float(flops)
    elems = float(sum(numel(t) for t in out_tensors if t is not None))
    return (costs.POINTWISE if has_tag(n, torch.Tag.pointwise) else costs.OTHER), elems


def node_work(n: torch.fx.Node, out_tensors: list | None = None) -> costs.OpWork:
    """What ATen node `n` does, for the cost models: its kind and FLOPs, the bytes it reads (its inputs'
    views) and writes (`out_tensors`, by default every tensor it returns), and the bytes of inputs another
    node produced (what a fused point-wise op takes from its producer)."""
    if out_tensors is None:
        out_tensors = [t for t in tensors_of(n.meta.get("val")) if t is not None]
    kind, flops = _kind_and_flops(n, out_tensors)
    in_vals = [v for a in n.all_input_nodes for v in tensors_of(a.meta.get("val")) if v is not None]
    producer = float(sum(view_bytes(v) for a in n.all_input_nodes if a.op != "placeholder"
                         for v in tensors_of(a.meta.get("val")) if v is not None))
    return costs.OpWork(kind=kind, flops=flops, bytes_read=float(sum(view_bytes(v) for v in in_vals)),
                        bytes_written=float(sum(view_bytes(t) for t in out_tensors)), producer_bytes=producer,
                        precision=costs.precision_of(v.dtype for v in in_vals))


def forward_roots(joint: Joint) -> list:
    """Names of the nodes whose ancestors are the forward: ``joint.forward_roots``, else the loss and the
    mutated buffers."""
    return joint.forward_roots if joint.forward_roots is not None else [joint.loss, *joint.mutations]


def forward_nodes(joint: Joint) -> set:
    """Names of the forward's nodes: what the forward roots depend on."""
    by_name = {n.name: n for n in joint.gm.graph.nodes}
    forward, stack = set(), [by_name[k] for k in forward_roots(joint)]
    while stack:
        n = stack.pop()
        if n.name in forward:
            continue
        forward.add(n.name)
        stack.extend(n.all_input_nodes)
    return forward
