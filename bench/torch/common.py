"""What the PyTorch benchmarks share: the models at their sizes, and a table printer.

Run them with the venv the test command builds: build/venv/bin/python bench/torch/NAME.py [--models ...].
They find the memplan command in build/bin (or $MEMPLAN)."""
from __future__ import annotations

import argparse
import os
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
sys.path.insert(0, os.path.join(ROOT, "python"))
sys.path.insert(0, os.path.join(ROOT, "python", "tests"))
os.environ.setdefault("MEMPLAN", os.path.join(ROOT, "build", "bin", "memplan"))

import torch  # noqa: E402
import torchvision  # noqa: E402

from gpt2 import example, gpt2_small, lm_loss  # noqa: E402


def image(factory, batch, size=224):
    def make():
        torch.manual_seed(0)
        g = torch.Generator().manual_seed(0)
        return (factory(), (torch.randn(batch, 3, size, size, generator=g),),
                (torch.randint(0, 1000, (batch,), generator=g),), None)
    return make


def gpt2(batch=2, seq=512, dropout=0.1):
    def make():
        torch.manual_seed(0)
        x, y = example(batch, seq)
        return gpt2_small(dropout=dropout), (x,), (y,), lm_loss
    return make


MODELS = {
    "resnet18": image(torchvision.models.resnet18, 16),
    "resnet50": image(torchvision.models.resnet50, 8),
    "mobilenet_v2": image(torchvision.models.mobilenet_v2, 8),
    "vgg16": image(torchvision.models.vgg16, 8),
    "gpt2": gpt2(),
}
LABEL = {"resnet18": "ResNet-18 (b16)", "resnet50": "ResNet-50 (b8)", "mobilenet_v2": "MobileNet-V2 (b8)",
         "vgg16": "VGG-16 (b8)", "gpt2": "GPT-2 small (2x512)"}


def mib(b):
    return "-" if b is None else f"{b / 2**20:.1f}"


def table(header, rows):
    cols = [header] + [[str(c) for c in r] for r in rows]
    w = [max(len(r[i]) for r in cols) for i in range(len(header))]
    line = lambda r: "| " + " | ".join(c.ljust(w[i]) for i, c in enumerate(r)) + " |"  # noqa: E731
    print(line(header))
    print("|" + "|".join("-" * (x + 2) for x in w) + "|")
    for r in cols[1:]:
        print(line(r))
    sys.stdout.flush()


def table_parser(models: list[str]) -> argparse.ArgumentParser:
    """The command line every table bench shares: the models (default: all of `models`) and ``--out FILE``
    (the table in markdown, written a row as it is known, see `row_printer`)."""
    ap = argparse.ArgumentParser()
    ap.add_argument("models", nargs="*", default=models, help=f"(default: all) {' '.join(models)}")
    ap.add_argument("--out", help="also write the table (markdown) to this file, a row as it is known")
    return ap


def row_printer(header, path=None):
    """Prints a markdown table's header, and returns the function that prints one row of it (a list of cells);
    each line is also appended to `path` when given, a row as it is known."""
    def put(cols):
        line = "| " + " | ".join(cols) + " |"
        print(line, flush=True)
        if path:
            with open(path, "a") as f:
                f.write(line + "\n")
    put(header)
    put(["---"] * len(header))
    return put


def log(msg):
    print(f"[{time.strftime('%H:%M:%S')}] {msg}", file=sys.stderr, flush=True)


def clear_grads(model):
    for p in model.parameters():
        p.grad = None


def peak_and_time(model, inputs, targets, step, repeats):
    """(measured peak bytes, median seconds) of `step` (forward and backward) on `model`: one warm-up
    call, one profiled call (gradients cleared first, weights, buffers and inputs resident), then
    `repeats` unprofiled calls."""
    from memplan_torch.probe import peak_of, storage_bytes, timed

    step()
    clear_grads(model)
    resident = storage_bytes(list(model.parameters()) + list(model.buffers()) + list(inputs) + list(targets))
    torch.manual_seed(1)
    peak = peak_of(step, resident)[0]
    clear_grads(model)
    return peak, timed(lambda: (step(), clear_grads(model)), repeats)


def rel(a, b):
    """max |a - b| / max |b|."""
    return ((a - b).abs().max() / b.abs().max().clamp_min(1e-30)).item()


# Of a model's largest gradient: a gradient below it is compared at this scale. A gradient that is zero in
# exact arithmetic comes out of fp32 sums as round-off, about 4e-8 of the largest on efficientnet_b0.
ROUNDOFF = 1e-3


def grad_diff(model, ref):
    """(largest relative difference of `model`'s gradients against `ref`'s over the parameters with one in both,
    parameters with a gradient in one of the two only). A parameter's difference is ``max |a - b|`` over
    ``max |b|``, or over ``ROUNDOFF`` times the largest gradient of `ref` when ``max |b|`` is smaller: a gradient
    that is zero in exact arithmetic (a bias followed by a batch norm) is round-off in both runs, and a ratio of
    two round-offs says nothing about the plan. Every gradient of at least ``ROUNDOFF`` of the largest is
    compared relative to itself."""
    worst, missing = 0.0, 0
    grads = [q.grad for q in ref.parameters() if q.grad is not None]
    floor = ROUNDOFF * max((g.abs().max().item() for g in grads), default=0.0)
    for p, q in zip(model.parameters(), ref.parameters()):
        if p.grad is None or q.grad is None:
            missing += (p.grad is None) != (q.grad is None)
        else:
            scale = max(q.grad.abs().max().item(), floor, 1e-30)
            worst = max(worst, (p.grad - q.grad).abs().max().item() / scale)
    return worst, missing


def planned_peak(cm, inputs, targets):
    """Measured CPU peak bytes of one planned step of `cm` (compile's module; gradients cleared first): its
    model's weights, buffers, the graph's constants and the inputs resident, plus what the step adds."""
    from memplan_torch.probe import peak_of, storage_bytes
    clear_grads(cm.model)
    resident = storage_bytes(list(cm.model.parameters()) + list(cm.model.buffers()) + list(inputs) + list(targets)
                             + list(cm.interp.constants.values()))
    return peak_of(lambda: cm(*inputs, *targets).backward(), resident)[0]


RESULT = "memplan-bench-result: "


def isolated(script: str, argv: list[str]) -> dict:
    """Runs `script` again with `argv` (one configuration) in a process of its own and returns the dict
    it prints on its stdout line starting with RESULT (see `emit`). Each configuration gets a fresh
    process: PyTorch's traced graphs, compiled partitions and allocator caches from earlier
    configurations would otherwise pile up (one process for a whole table grew to 14 GiB), and the
    measured peak of one configuration must not depend on what ran before it. Raises RuntimeError with
    the child's last stderr line when it fails."""
    import json
    import subprocess
    p = subprocess.run([sys.executable, script, *argv], stdout=subprocess.PIPE, stderr=None, text=True)
    for line in reversed(p.stdout.splitlines()):
        if line.startswith(RESULT):
            return json.loads(line[len(RESULT):])
    raise RuntimeError(f"{os.path.basename(script)} {' '.join(argv)}: exit {p.returncode}, no result")


def emit(result: dict) -> None:
    """The result of one configuration, for `isolated` in the parent process."""
    import json
    print(RESULT + json.dumps(result), flush=True)
