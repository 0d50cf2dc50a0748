"""What holds a plan's peak, in the user's terms: the modules, shapes and dtypes behind memplan's names.

``memplan plan --json`` reports, after a missed peak budget, the smallest plan it found and the buffers live
at that plan's peak (``"smallest"``, docs/remat.md "Budgets"). Here each memplan tensor becomes the joint
graph's node that makes it: the module that ran it (the FX node's ``nn_module_stack``; a backward node
carries its forward node's as ``fwd_nn_module_stack``), its shape and dtype.
"""
from __future__ import annotations

import re
import warnings

import torch
import torch.fx

from .lower import Mapping

LISTED = 8  # live buffers named in the message


def _mib(b: int) -> str:
    return f"{b / 2**20:.1f} MiB"


def module_path(n: torch.fx.Node) -> str | None:
    """The qualified name of the innermost module that ran `n` ("model.layers.0.mlp"), or None (the loss, a
    function outside any module, or a graph without the metadata)."""
    stack = n.meta.get("nn_module_stack") or n.meta.get("fwd_nn_module_stack")
    if not stack:
        return None
    path = list(stack.values())[-1][0]
    # Dynamo writes L['self'].layers[0], L['model']._modules['lm_head'] or G['model'].lm_head (a local, an
    # argument, a global): as a qualified name from the module compiled ("layers.0") or the variable named.
    path = re.sub(r"^[LG]\['self'\]\.?", "", str(path))
    path = re.sub(r"^[LG]\['([^']*)'\]", r"\1", path)
    path = re.sub(r"\._modules\['([^']*)'\]", r".\1", path)
    path = re.sub(r"\[(\d+)\]", r".\1", path)
    return path.strip(".") or None


def _value(n: torch.fx.Node) -> str:
    v = n.meta.get("val")
    if isinstance(v, torch.Tensor):
        return f"{str(v.dtype).removeprefix('torch.')}{list(v.shape)}"
    return ""


def _node_words(n: torch.fx.Node, backward: bool) -> str:
    if n.op == "placeholder":
        value = _value(n)
        return f"'{n.name}' (an input of the graph planned: a weight, a buffer or an input{', ' + value if value else ''})"
    module = module_path(n)
    if module:
        where = f"{module}'s {'backward' if backward else 'forward'}"
    else:
        where = "the backward, outside any module" if backward else \
            "the forward, outside any module (the loss, or a function the step calls)"
    value = _value(n)
    return f"'{n.name}' ({where}{', ' + value if value else ''})"


def describe_smallest(report: dict | None, mapping: Mapping, gm: torch.fx.GraphModule, backward: set) -> str:
    """A paragraph on the smallest plan memplan found (``report["smallest"]``): its peak, the op running
    there and the largest buffers live there, each with the node that makes it, its module, shape and dtype.
    `backward`: names of the joint graph's nodes outside the forward. "" when the report has none."""
    small = (report or {}).get("smallest")
    if not small:
        return ""
    nodes = {n.name: n for n in gm.graph.nodes}
    peak = small["peak"]
    op_node = nodes.get(mapping.op_node.get(peak["op"], ""))
    at = _node_words(op_node, op_node.name in backward) if op_node is not None else f"'{peak['op']}'"
    lines = [f"The smallest peak memplan reached is {_mib(small['arena'])} ({small['arena']} bytes; "
             f"{small['overhead'] * 100:+.1f} % recomputation), at {at}; live there:"]
    for entry in peak["live"][:LISTED]:
        if "workspace" in entry:
            lines.append(f"  {_mib(entry['bytes']):>10}  the workspace of '{entry['workspace']}'")
            continue
        members = [nodes[m] for m in mapping.members.get(entry["tensor"], []) if m in nodes]
        made = next((m for m in members if m.op == "call_function"), members[0] if members else None)
        what = _node_words(made, made.name in backward) if made is not None else f"'{entry['tensor']}'"

        lines.append(f"  {_mib(entry['bytes']):>10}  {what}")
    if len(peak["live"]) > LISTED:
        rest = sum(e["bytes"] for e in peak["live"][LISTED:])
        lines.append(f"  {_mib(rest):>10}  in {len(peak['live']) - LISTED} more")
    lines.append(f"Give a budget of at least {small['arena']} bytes, a fraction (0.0 is this smallest peak), or "
                 "on_infeasible='smallest' to train at it.")
    return "\n".join(lines)


def explained(plan, mapping: Mapping, gm: torch.fx.GraphModule, backward: set, what: str):
    """``plan()`` (a call of ``command.plan``), its error for a missed peak budget extended with
    ``describe_smallest`` (the same exception type, its ``report`` kept), and a warning when memplan used its
    smallest plan instead (``on_infeasible="smallest"``). `what` names the graph planned ("the step", "a
    compiled region")."""
    try:
        plan_, report = plan()
    except RuntimeError as e:
        detail = describe_smallest(getattr(e, "report", None), mapping, gm, backward)
        if not detail:
            raise
        raise type(e)(f"{what}: {e}\n{detail}", e.report) from None
    small = report.get("smallest") or {}
    if small.get("used"):
        warnings.warn(f"{what}: no plan within the budget of {report['budget']} bytes; training at the smallest "
                      f"peak memplan reached ({small['arena']} bytes, on_infeasible='smallest').\n"
                      + describe_smallest(report, mapping, gm, backward), stacklevel=3)
    return plan_, report
