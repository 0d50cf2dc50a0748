"""python -m memplan_torch export --model torchvision.models:resnet50 --batch 8 [--image 224] -o G.json"""
from __future__ import annotations

import argparse
import importlib
import sys

import torch

from . import command
from .export import ExportError, OPTIMIZERS, WORKSPACES, export


def load_model(spec: str) -> torch.nn.Module:
    """'package.module:factory' -> factory() (a torch.nn.Module)."""
    mod_name, _, attr = spec.partition(":")
    if not mod_name or not attr:
        raise ExportError(f"--model '{spec}': expected MODULE:FACTORY, e.g. torchvision.models:resnet50")
    try:
        mod = importlib.import_module(mod_name)
    except ImportError as e:
        raise ExportError(f"--model '{spec}': cannot import '{mod_name}': {e}") from e
    factory = getattr(mod, attr, None)
    if factory is None:
        raise ExportError(f"--model '{spec}': module '{mod_name}' has no '{attr}'")
    model = factory()
    if not isinstance(model, torch.nn.Module):
        raise ExportError(f"--model '{spec}': {attr}() returned {type(model).__name__}, not a torch.nn.Module")
    return model


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(prog="python -m memplan_torch")
    sub = ap.add_subparsers(dest="cmd", required=True)
    ex = sub.add_parser("export", help="a model's training step as a memplan.graph")
    ex.add_argument("--model", required=True, help="MODULE:FACTORY, e.g. torchvision.models:resnet50")
    ex.add_argument("--batch", type=int, default=8)
    ex.add_argument("--image", type=int, default=224, help="image side (image models; default 224)")
    ex.add_argument("--seq", type=int, help="token inputs of this length instead of images (language models)")
    ex.add_argument("--vocab", type=int, help="vocabulary for --seq (default: the model's .vocab, else 50257)")
    ex.add_argument("--classes", type=int, default=1000, help="classes of image targets (default 1000)")
    ex.add_argument("--optimizer", default="sgd", choices=OPTIMIZERS)
    ex.add_argument("--cost", default="roofline:v100",
                    help="roofline:DEVICE, fused:DEVICE, measured (on --device; or measured:cpu, measured:cuda) or flops")
    ex.add_argument("--workspace", default="measured", choices=WORKSPACES,
                    help="measured (default: on --device), cpu or cuda (the same, insisting on it), or none")
    ex.add_argument("--device", default="cpu", help="where the step is traced and measured: cpu (default), cuda, cuda:1")
    ex.add_argument("--name", help="the graph's name (default MODEL-train-bBATCH)")
    ex.add_argument("-o", "--output", required=True)
    args = ap.parse_args(argv)
    try:
        if args.batch <= 0 or args.image <= 0 or (args.seq is not None and args.seq <= 0):
            raise ExportError("--batch, --image and --seq must be positive")
        try:
            device = torch.device(args.device)
        except RuntimeError as e:
            raise ExportError(f"--device '{args.device}': {e}") from None
        if device.type == "cuda" and not torch.cuda.is_available():
            raise ExportError(f"--device '{args.device}': no CUDA device is available")
        model = load_model(args.model).to(device)
        torch.manual_seed(0)
        if args.seq:
            vocab = args.vocab or getattr(model, "vocab", 50257)
            x = torch.randint(0, vocab, (args.batch, args.seq))
            inputs, targets = (x.to(device),), (torch.roll(x, -1, dims=1).to(device),)
        else:
            inputs = (torch.randn(args.batch, 3, args.image, args.image).to(device),)
            targets = (torch.randint(0, args.classes, (args.batch,)).to(device),)
        name = args.name or f"{args.model.partition(':')[2]}-train-b{args.batch}"
        progress = (lambda s: print(f"memplan_torch: {s}", file=sys.stderr)) if sys.stderr.isatty() else None
        g = export(model, inputs, None, optimizer=args.optimizer, targets=targets, cost=args.cost, name=name,
                   workspace=args.workspace, progress=progress)
        command.write_json(g, args.output)
    except (ExportError, ValueError) as e:
        print(f"memplan_torch: error: {e}", file=sys.stderr)
        return 2
    n_ops = len(g["ops"])
    print(f"wrote {args.output}: {name}, {len(g['tensors'])} tensors, {n_ops} ops, "
          f"{g['memplan_torch']['parameters']} parameters")
    return 0


if __name__ == "__main__":
    sys.exit(main())
