"""memplan_torch: PyTorch training steps to memplan and back.

- ``export(model, example_inputs, loss_fn, optimizer=...)`` -> a ``memplan.graph`` dict;
- ``compile(model, budget, example_inputs, ...)`` -> a module whose training step follows
  memplan's plan (what the forward keeps, what the backward recomputes);
- ``torch._inductor.config.custom_partitioner_fn = Partitioner(budget)``: ``torch.compile`` saves for the
  backward what memplan's plan keeps and recomputes the rest (Inductor compiles both halves);
- ``python -m memplan_torch export --model torchvision.models:resnet50 --batch 8 -o G.json``.

The C++ side is reached only through the ``memplan`` command (see ``command.py``).
"""
from .command import Infeasible, MemplanError, NoPlan
from .export import ExportError, export

__all__ = ["export", "ExportError", "MemplanError", "Infeasible", "NoPlan"]
from .planned import PlannedModule, compile  # noqa: E402

__all__ += ["compile", "PlannedModule"]

__all__ += ["Partitioner"]


def __getattr__(name):
    # The partitioner imports Inductor's pass interface: only when it is asked for.
    if name == "Partitioner":
        from .partitioner import Partitioner
        return Partitioner
    raise AttributeError(f"module 'memplan_torch' has no attribute '{name}'")
