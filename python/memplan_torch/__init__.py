"""memplan_torch: PyTorch training steps planned by memplan, through three doors.

1. ``export(model, example_inputs, loss_fn, optimizer=...)`` -> a ``memplan.graph`` dict, to plan with the
   ``memplan`` command (``python -m memplan_torch export ...`` from the shell);
2. ``compile(model, budget, example_inputs, ...)`` -> a module whose training step follows memplan's plan
   (what the forward keeps, what the backward recomputes), run eagerly;
3. ``Partitioner(budget)`` as Inductor's ``custom_partitioner_fn``: ``torch.compile`` saves for the backward
   what memplan's plan keeps and recomputes the rest (Inductor compiles both halves; docs/torch.md).

A budget means the same at every door (``memplan_torch.budget``). The C++ side is reached only through the
``memplan`` command (``command``). Layers, lowest first (each imports only those before it; checked by
tests/layers/check_python.py): ``_compat`` (PyTorch's private names); ``budget``, ``command``, ``device``;
``costs``, ``probe``, ``workspaces``; ``step/`` (vocabulary, fake tensors, tracing); ``graph/`` (nodes,
lowering, the exported step, Inductor's view, schedules); the doors ``export``, ``planned``, ``partitioner``.
"""
from .command import Infeasible, MemplanError, NoPlan
from .export import export
from .planned import PlannedModule, compile
from .step.joint import ExportError, default_loss, step_loss

__all__ = ["export", "compile", "PlannedModule", "Partitioner", "Partition", "ExportError", "MemplanError",
           "Infeasible", "NoPlan", "default_loss", "step_loss"]


def __getattr__(name):
    # The partitioner imports Inductor's pass interface: only when it is asked for.
    if name in ("Partitioner", "Partition"):
        from . import partitioner
        return getattr(partitioner, name)
    raise AttributeError(f"module 'memplan_torch' has no attribute '{name}'")
