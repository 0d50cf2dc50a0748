"""memplan_torch: PyTorch training steps to memplan and back.

- ``export(model, example_inputs, loss_fn, optimizer=...)`` -> a ``memplan.graph`` dict;
- ``compile(model, budget, example_inputs, ...)`` -> a module whose training step follows
  memplan's plan (what the forward keeps, what the backward recomputes);
- ``python -m memplan_torch export --model torchvision.models:resnet50 --batch 8 -o G.json``.

The C++ side is reached only through the ``memplan`` command (see ``command.py``).
"""
from .command import Infeasible, MemplanError, NoPlan
from .export import ExportError, export

__all__ = ["export", "ExportError", "MemplanError", "Infeasible", "NoPlan"]
from .planned import PlannedModule, compile  # noqa: E402

__all__ += ["compile", "PlannedModule"]
