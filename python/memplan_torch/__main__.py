"""python -m memplan_torch export --model torchvision.models:resnet50 --batch 8 [--image 224] -o G.json

A model without its memory: ``--device meta`` builds it on the meta device and exports it through fake
tensors (memplan_torch.graph.step_graph), for example an 8B Llama from its Hugging Face configuration:

    python -m memplan_torch export --model transformers:LlamaForCausalLM --config config.json --device meta \
        --seq 4096 --batch 1 --dtype bf16 --optimizer adamw --cost roofline:h100 -o llama.json
"""
from __future__ import annotations

import argparse
import contextlib
import importlib
import json
import sys

import torch

from . import command
from .export import export
from .step.joint import MODEL_LOSS, OPTIMIZERS, WORKSPACES, ExportError

DTYPES = {"fp32": torch.float32, "fp16": torch.float16, "bf16": torch.bfloat16}


def _read_config(path: str) -> dict:
    try:
        with open(path) as f:
            cfg = json.load(f)
    except OSError as e:
        raise ExportError(f"--config '{path}': {e.strerror or e}") from None
    except json.JSONDecodeError as e:
        raise ExportError(f"--config '{path}': not JSON ({e})") from None
    if not isinstance(cfg, dict):
        raise ExportError(f"--config '{path}': expected a JSON object (a configuration's fields)")
    return cfg


def _transformers_model(cls_name: str, cfg: dict) -> torch.nn.Module:
    """transformers.CLS built from a configuration dict (the fields of its config.json), for training: no
    key/value cache."""
    try:
        transformers = importlib.import_module("transformers")
    except ImportError as e:
        raise ExportError(f"--model transformers:{cls_name}: cannot import transformers: {e}") from None
    cls = getattr(transformers, cls_name, None)
    config_class = getattr(cls, "config_class", None)
    if cls is None or config_class is None:
        raise ExportError(f"--model transformers:{cls_name}: transformers has no model class '{cls_name}'")
    cfg = {k: v for k, v in cfg.items() if k not in ("torch_dtype", "dtype")}  # --dtype decides
    config = config_class.from_dict(cfg)
    config.use_cache = False
    return cls(config)


def load_model(spec: str, config: dict | None = None, device: str | None = None, dtype=None) -> torch.nn.Module:
    """'package.module:factory' -> factory() (or factory(**config)); 'transformers:CLASS' -> CLASS(CLASS's
    configuration from `config`). Built under `device` (e.g. "meta": no memory) with `dtype` as the default
    floating type."""
    mod_name, _, attr = spec.partition(":")
    if not mod_name or not attr:
        raise ExportError(f"--model '{spec}': expected MODULE:FACTORY, e.g. torchvision.models:resnet50, "
                          "or transformers:CLASS with --config")
    if mod_name == "transformers" and config is None:
        raise ExportError(f"--model '{spec}': a transformers class is built from its configuration: give --config "
                          "CONFIG.json (the model's config.json)")
    old = torch.get_default_dtype()
    try:
        if dtype is not None:
            torch.set_default_dtype(dtype)
        with torch.device(device) if device is not None else contextlib.nullcontext():
            if mod_name == "transformers":
                model = _transformers_model(attr, config)
            else:
                try:
                    mod = importlib.import_module(mod_name)
                except ImportError as e:
                    raise ExportError(f"--model '{spec}': cannot import '{mod_name}': {e}") from e
                factory = getattr(mod, attr, None)
                if factory is None:
                    raise ExportError(f"--model '{spec}': module '{mod_name}' has no '{attr}'")
                model = factory(**(config or {}))
    finally:
        torch.set_default_dtype(old)
    if not isinstance(model, torch.nn.Module):
        raise ExportError(f"--model '{spec}': {attr}() returned {type(model).__name__}, not a torch.nn.Module")
    return model


def _vocab(model) -> int | None:
    cfg = getattr(model, "config", None)
    return getattr(model, "vocab", None) or getattr(cfg, "vocab_size", None) or getattr(cfg, "vocab", None)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(prog="python -m memplan_torch")
    sub = ap.add_subparsers(dest="cmd", required=True)
    ex = sub.add_parser("export", help="a model's training step as a memplan.graph")
    ex.add_argument("--model", required=True,
                    help="MODULE:FACTORY, e.g. torchvision.models:resnet50, or transformers:CLASS with --config")
    ex.add_argument("--config", help="a JSON object: the configuration of a transformers:CLASS (its config.json), "
                                     "or keyword arguments of FACTORY")
    ex.add_argument("--dtype", choices=tuple(DTYPES), help="the model's floating type (default: PyTorch's, fp32)")
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
    ex.add_argument("--device", default="cpu",
                    help="where the step is traced and measured: cpu (default), cuda, cuda:1; or meta: the model is "
                         "built without memory and exported through fake tensors (costs from --cost's device model, "
                         "no workspaces)")
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
        meta = device.type == "meta"
        config = _read_config(args.config) if args.config else None
        dtype = DTYPES[args.dtype] if args.dtype else None
        if meta:
            model = load_model(args.model, config, "meta", dtype)
        else:
            model = load_model(args.model, config, None, dtype).to(device)
        torch.manual_seed(0)
        hf = args.model.partition(":")[0] == "transformers"
        if args.seq:
            if meta:  # no values: shapes and types are all a meta model's export reads
                x = torch.empty(args.batch, args.seq, dtype=torch.long, device="meta")
                inputs, targets = (x,), (torch.empty_like(x),)
            else:
                vocab = args.vocab or _vocab(model) or 50257
                x = torch.randint(0, vocab, (args.batch, args.seq))
                # A Hugging Face model shifts its labels itself.
                inputs, targets = (x.to(device),), ((x if hf else torch.roll(x, -1, dims=1)).to(device),)
        else:
            fdtype = dtype or torch.get_default_dtype()
            if meta:
                inputs = (torch.empty(args.batch, 3, args.image, args.image, dtype=fdtype, device="meta"),)
                targets = (torch.empty(args.batch, dtype=torch.long, device="meta"),)
            else:
                inputs = (torch.randn(args.batch, 3, args.image, args.image, dtype=fdtype).to(device),)
                targets = (torch.randint(0, args.classes, (args.batch,)).to(device),)
        name = args.name or f"{args.model.partition(':')[2]}-train-b{args.batch}"
        progress = (lambda s: print(f"memplan_torch: {s}", file=sys.stderr)) if sys.stderr.isatty() else None
        # A Hugging Face model computes its own loss from labels= (the logits made fp32, the labels shifted), as
        # its training does; other models' outputs get a cross-entropy against the targets.
        loss_fn = MODEL_LOSS if hf else None
        g = export(model, inputs, loss_fn, optimizer=args.optimizer, targets=targets, cost=args.cost, name=name,
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
