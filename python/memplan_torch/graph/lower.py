"""Lowering a traced step (``Joint``) to a ``memplan.graph``, in named phases.

- **Buffers, not values.** A memplan tensor is one storage. Views and aliases (``view``, ``t``, ``permute``,
  ``expand``, ``alias``, ``getitem`` of a multi-output op, ``_unsafe_view``) share their base's storage (the
  fake values say so) and are not tensors of their own; a copy that a reshape forces (``clone`` then
  ``_unsafe_view``) is. Every node that creates a storage is a memplan op producing it; nodes whose outputs
  are all views are not ops (they cost nothing and are recomputed freely by the executor).
- **Phases.** Ops that the loss or the mutated buffers depend on are ``forward``; the rest of the joint graph
  is ``backward``, as in PyTorch's partitioners (an op the trace runs before the seed that only the backward
  reads, such as the clone an in-place ReLU6 leaves, is listed just before its first reader); the optimizer
  adds one ``update`` op per parameter (SGD reads the weight and its gradient; Adam also its two moments,
  persistent, and a weight-sized temporary).
- **Persistent**: parameters (tied ones once), buffers, constants the trace lifts (``get_attr`` nodes),
  optimizer state, and the step's inputs (the caller holds them for the whole step). Parameters no gradient
  reaches have no gradient and no update.
- **Mutated inputs.** Batch-norm's new running statistics are graph ``outputs``, copied into the buffers after
  the step; a recomputed batch norm produces them again without touching the buffers.
- **Random ops** (ATen tag ``nondeterministic_seeded``: dropout, ``rand``...) read a seed tensor of their own
  (8 bytes, a graph input) and carry ``"random": true``: a plan that recomputes one keeps its seed, and the
  executor replays it, so a recomputed mask is the mask of the forward.
- **Costs**: a device model's (``roofline:DEVICE``, ``fused:DEVICE``, ``flops``) from each node's work, or
  each node's measured time.

No variants are offered: the backward ops of the joint graph already read what ATen's derivative formulas
read (ReLU's backward reads its output), and a batch-norm backward from its output would need a kernel ATen
does not have.
"""
from __future__ import annotations

import dataclasses
import math
import operator

import torch
import torch.fx

from .. import costs
from ..step.joint import ExportError, Joint, check_options
from .nodes import forward_nodes, forward_roots, is_inplace, is_random, node_work, numel, storage_bytes, \
    storage_key, tensors_of


@dataclasses.dataclass
class Mapping:
    """How the memplan graph's names map onto the joint graph (what the executor needs)."""
    tensor_of: dict          # fx node name -> list of memplan tensor names it holds (storages)
    members: dict            # memplan tensor name -> fx node names whose value lives in it
    op_node: dict            # memplan op name -> fx node name (forward/backward ops)
    op_phase: dict           # memplan op name -> phase
    random_ops: list         # memplan op names of random ops
    seed_tensor: dict        # memplan op name (random) -> seed tensor name
    update_ops: dict         # memplan op name -> parameter FQN (update phase)


def deferred_nodes(joint: Joint, forward: set) -> set:
    """What the trace runs before the backward's seed but neither the loss nor a mutation needs (copies that
    only the backward reads) is backward work, as in PyTorch's own partitioners: for an in-place op whose
    derivative reads its input (torchvision's ReLU6(inplace=True)), functionalization clones the input in the
    forward and hands the clone to the backward. Such an op is listed just before its first reader, so the
    clone is made where the backward needs it (as forward ops, MobileNet-V2's 35 clones were 184 MiB of saved
    activations at batch 8, though PyTorch runs them once in the backward whatever the budget)."""
    nodes = list(joint.gm.graph.nodes)
    if joint.tangents:  # the backward starts at the first node that reads what a tangent makes
        after_seed = set(joint.tangents)
        for n in nodes:
            if any(a.name in after_seed for a in n.all_input_nodes):
                after_seed.add(n.name)
        seed = next((n.name for n in nodes if n.op == "call_function" and n.name in after_seed), None)
    else:
        seed = joint.seed
    deferred = set()
    if seed is not None:
        for n in nodes:
            if n.name == seed:
                break
            if n.op == "call_function" and n.name not in forward:
                deferred.add(n.name)
    return deferred


class _Lowering:
    """The memplan.graph being built: its tensors and ops, and the names that map them onto the joint graph."""

    def __init__(self, joint: Joint, cost: str, measured: dict | None, workspaces: dict | None):
        self.joint, self.cost, self.measured, self.workspaces = joint, cost, measured, workspaces or {}
        self.measured_costs = costs.parse(cost)[0] == "measured"
        self.forward = forward_nodes(joint)
        self.deferred = deferred_nodes(joint, self.forward)
        self.tensors: list[dict] = []
        self.tensor_index: dict[str, int] = {}
        self.storage_name: dict = {}      # storage key -> memplan tensor name
        self.used: set = set()
        self.ops: list[dict] = []
        self.n_params = 0
        self.map = Mapping(tensor_of={}, members={}, op_node={}, op_phase={}, random_ops=[], seed_tensor={},
                           update_ops={})

    def unique(self, base: str) -> str:
        name, k = base, 1
        while name in self.used:
            k += 1
            name = f"{base}#{k}"
        self.used.add(name)
        return name

    def add_tensor(self, name: str, nbytes: int, persistent: bool = False) -> str:
        name = self.unique(name)
        entry = {"name": name, "bytes": int(nbytes)}
        if persistent:
            entry["persistent"] = True
        self.tensor_index[name] = len(self.tensors)
        self.tensors.append(entry)
        self.map.members[name] = []
        return name

    def hold(self, node: str, names: list, member: bool = True) -> None:
        """Node `node`'s value lives in the memplan tensors `names`."""
        self.map.tensor_of[node] = names
        if member:
            for t in names:
                self.map.members[t].append(node)

    def storages(self, vals: list) -> list:
        """The memplan tensors of the storages `vals` live in, each once, in order."""
        return list(dict.fromkeys(self.storage_name[storage_key(t)] for t in vals if t is not None))

    # Phase 1: the step's persistent tensors and constants.
    def placeholder(self, n: torch.fx.Node, t: torch.Tensor) -> None:
        joint = self.joint
        if n.name in joint.tangents:  # made by its tangent op (phase 3)
            self.hold(n.name, [self.add_tensor(n.name, storage_bytes(t))])
            return
        if n.name in joint.params:
            label = joint.params[n.name]
            self.n_params += numel(t)
        elif n.name in joint.buffers:
            label = joint.buffers[n.name]
        else:
            label = f"input{joint.inputs.index(n.name)}" if n.name in joint.inputs else n.name
        k = storage_key(t)
        if k in self.storage_name:  # two placeholders on one storage (a tied weight): one buffer
            if n.name in joint.params:
                self.n_params -= numel(t)
        else:
            self.storage_name[k] = self.add_tensor(label, storage_bytes(t), True)
        self.hold(n.name, [self.storage_name[k]])

    def constant(self, n: torch.fx.Node, t: torch.Tensor) -> None:
        """A constant the trace lifted (a tensor the forward makes from Python data, a plain tensor
        attribute): persistent and read-only, one tensor per storage."""
        k = storage_key(t)
        if k not in self.storage_name:
            self.storage_name[k] = self.add_tensor(str(n.target), storage_bytes(t), True)
        self.hold(n.name, [self.storage_name[k]])

    # Phase 2: each call that makes a storage (or writes in place, or draws) is an op.
    def call(self, n: torch.fx.Node, vals: list) -> None:
        new = [(i, t) for i, t in enumerate(vals) if t is not None and storage_key(t) not in self.storage_name]
        if not (new or is_inplace(n) or is_random(n)):
            self.hold(n.name, self.storages(vals))  # a view, an alias or a getitem: its value lives in storages that exist
            return
        gi = {u.args[1]: u for u in n.users if u.op == "call_function" and u.target is operator.getitem
              and isinstance(u.args[1], int)}
        multi = isinstance(n.meta.get("val"), (tuple, list))
        outs = []
        for i, t in new:
            base = gi[i].name if multi and i in gi else (f"{n.name}.{i}" if multi else n.name)
            self.storage_name[storage_key(t)] = self.add_tensor(base, storage_bytes(t))
            outs.append(self.storage_name[storage_key(t)])
        self.hold(n.name, self.storages(vals), member=not multi)
        ins = []
        for a in n.all_input_nodes:
            ins += [t for t in self.map.tensor_of.get(a.name, []) if t not in ins and t not in outs]
        opname = self.unique(n.name)
        phase = "forward" if n.name in self.forward else "backward"
        op = {"name": opname, "inputs": ins, "outputs": outs, "phase": phase, "aten": str(n.target)}
        if is_random(n):
            seed = self.add_tensor(f"{n.name}.seed", 8)
            op["inputs"] = ins + [seed]
            op["random"] = True
            self.map.random_ops.append(opname)
            self.map.seed_tensor[opname] = seed
        work = node_work(n, [t for _, t in new])
        op["cost"] = float(self.measured.get(n.name, 0.0)) if self.measured_costs \
            else costs.model_us(self.cost, work)
        op["flops"] = work.flops if work.kind == costs.MATMUL else 0.0
        if self.workspaces.get(n.name, 0) > 0:
            op["workspace"] = int(self.workspaces[n.name])
        self.ops.append(op)
        self.map.op_node[opname] = n.name
        self.map.op_phase[opname] = phase

    # Phase 3: deferred ops just before their first reader (the last listed first, so that a chain of them
    # keeps its order; one nothing reads stays where it was), then the tangents.
    def place_deferred(self) -> None:
        ops = self.ops
        for i in reversed(range(len(ops))):
            if self.map.op_node.get(ops[i]["name"]) not in self.deferred:
                continue
            outs_i = set(ops[i]["outputs"])
            first = next((j for j in range(i + 1, len(ops)) if outs_i & set(ops[j]["inputs"])), None)
            if first is not None:
                ops.insert(first - 1, ops.pop(i))

    def add_tangents(self) -> None:
        """Each tangent made just before the first backward op, after the forward's outputs it reads."""
        joint, m = self.joint, self.map
        if not joint.tangents:
            return
        first = next((i for i, op in enumerate(self.ops) if op["phase"] != "forward"
                      and m.op_node.get(op["name"]) not in self.forward
                      and m.op_node.get(op["name"]) not in self.deferred), len(self.ops))
        fwd_outs = list(dict.fromkeys(t for k in forward_roots(joint) for t in m.tensor_of[k]))
        for k, tangent in enumerate(joint.tangents):
            opname = self.unique(f"tangent.{tangent}")
            self.ops.insert(first + k, {"name": opname, "inputs": fwd_outs, "outputs": m.tensor_of[tangent],
                                        "phase": "backward", "cost": 0.0, "aten": "tangent"})
            m.op_node[opname] = tangent
            m.op_phase[opname] = "backward"

    # Phase 4: the optimizer, one update op per parameter with a gradient. A tied weight lifted under several
    # names has one gradient per name (autograd sums them): one update reads them all.
    def add_updates(self, optimizer: str) -> None:
        joint, m = self.joint, self.map
        param_tensor = {fqn: m.tensor_of[ph][0] for ph, fqn in joint.params.items()}
        grads_of: dict = {}
        for node, fqn in joint.grads.items():
            tname = param_tensor.get(fqn) or param_tensor.get(joint.params.get(fqn, ""), None)
            if tname is not None:
                grads_of.setdefault(tname, []).extend(m.tensor_of[node])
        fqn_of = {}
        for fqn in joint.params.values():
            fqn_of.setdefault(param_tensor[fqn], fqn)
        adam = optimizer in ("adam", "adamw")  # AdamW: Adam's two moments and temporary, decay in place
        for ptensor, fqn in fqn_of.items():
            if ptensor not in grads_of:
                continue
            ins = [ptensor] + [g for g in dict.fromkeys(grads_of[ptensor]) if g != ptensor]
            nb = self.tensors[self.tensor_index[ptensor]]["bytes"]
            if adam:
                ins += [self.add_tensor(f"{fqn}.exp_avg", nb, True), self.add_tensor(f"{fqn}.exp_avg_sq", nb, True)]
            moved = (7.0 if adam else 3.0) * nb
            if self.measured_costs:
                us = costs.measure_update_us(joint.param_tensors[fqn], "adam" if adam else optimizer)
            else:
                us = costs.model_us(self.cost, costs.OpWork(
                    kind=costs.POINTWISE, flops=joint.param_tensors[fqn].numel() * (10 if adam else 2),
                    bytes_read=moved * 2 / 3, bytes_written=moved / 3))
            opname = self.unique(f"update.{fqn}")
            op = {"name": opname, "inputs": ins, "outputs": [], "phase": "update", "cost": us}
            if adam and nb:
                op["workspace"] = int(nb)
            self.ops.append(op)
            m.update_ops[opname] = fqn
            m.op_phase[opname] = "update"

    # Phase 5: what the step returns. Gradients are outputs too: autograd hands them to `.grad`, and the
    # optimizer reads them after the backward (``loss.backward(); opt.step()``), so no plan may free one at
    # an early update op.
    def outputs(self) -> list:
        joint = self.joint
        returned = joint.outputs if joint.outputs is not None else [joint.loss, *joint.mutations, *joint.grads]
        outs = list(dict.fromkeys(t for a in returned for t in self.map.tensor_of[a]))
        if joint.outputs is not None:
            # A compiled region's backward is called with its tangents and holds them until it returns
            # (autograd passes them as the arguments of the region's backward function).
            outs += [t for a in joint.tangents for t in self.map.tensor_of[a] if t not in outs]
        if not joint.recompute_random:
            outs += [t for op in self.ops if op.get("random") and op["phase"] == "forward"
                     for t in op["outputs"] if t not in outs]
        return outs


def build_graph(joint: Joint, optimizer: str | None = "sgd", cost: str = "roofline:v100", name: str = "model",
                measured: dict | None = None, workspaces: dict | None = None) -> tuple[dict, Mapping]:
    """The memplan.graph (a dict ready for JSON) of `joint`, and how its names map onto the joint graph.
    `optimizer`: None for a joint graph without one (a compiled region's). `measured`: node name ->
    microseconds, required when `cost` is measured ('measured[:cpu|:cuda]')."""
    check_options(optimizer)
    if costs.parse(cost)[0] == "measured" and measured is None:
        raise ExportError(f"cost '{cost}' needs measured node times (memplan_torch.costs.measure_node_times)")
    low = _Lowering(joint, cost, measured, workspaces)
    for n in joint.gm.graph.nodes:
        if n.op == "output":
            continue
        vals = tensors_of(n.meta.get("val"))
        if n.op == "placeholder" and isinstance(n.meta.get("val"), (int, torch.SymInt)):
            low.hold(n.name, [])  # a size (dynamic shapes: a symbolic one), not a tensor
            continue
        if n.op in ("placeholder", "get_attr"):
            t = vals[0] if vals else None
            if t is None:
                raise ExportError(f"placeholder '{n.name}' has no tensor value" if n.op == "placeholder" else
                                  f"node '{n.name}' reads '{n.target}', which has no tensor value")
            (low.placeholder if n.op == "placeholder" else low.constant)(n, t)
        elif n.op == "call_function":
            low.call(n, vals)
        else:
            raise ExportError(f"node '{n.name}': unsupported FX node kind '{n.op}' in the joint graph")
    low.place_deferred()
    low.add_tangents()
    if optimizer is not None:
        low.add_updates(optimizer)
    outputs = low.outputs()
    for op in low.ops:
        op["cost"] = float(op["cost"]) if math.isfinite(op["cost"]) else 0.0
    g = {
        "format": "memplan.graph",
        "version": 1,
        "name": name,
        "cost_unit": costs.unit(cost),
        "cost_model": cost,
        "tensors": low.tensors,
        "ops": low.ops,
        "outputs": outputs,
        "memplan_torch": {
            "torch": torch.__version__,
            "parameters": int(low.n_params),
            "optimizer": optimizer,
            "loss": low.map.tensor_of[joint.loss][0],
        },
    }
    return g, low.map
