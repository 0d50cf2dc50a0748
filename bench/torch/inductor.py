"""memplan's partitioner against PyTorch's inside torch.compile (Inductor), side by side in one process.

    build/venv/bin/python bench/torch/inductor.py [--budgets 1.0,0.7,0.5,0.3] [--repeats 20] [--dtype float32|float64]
        [--time-limit S] [--cost MODEL] [--out FILE] [MODEL ...]

For each model and each fraction f of ``--budgets``, one process (``common.isolated``) compiles the model's training
step (``loss.backward()`` of ``torch.compile(step, fullgraph=True)``) five times with Inductor on this machine:

- ``pytorch``: PyTorch's own partitioner (min-cut) at ``torch._functorch.config.activation_memory_budget = f``;
- ``pytorch again``: the same, compiled again: the step times of two identical arms differ by the machine's
  noise, and the note of every other arm says whether it is slower than ``pytorch`` by more than that spread;
- ``memplan saved``: ``memplan_torch.Partitioner(S, budget_on="saved")`` where S is the bytes the ``pytorch`` arm
  saves for the backward (PyTorch's f is relative to its min-cut's own choice, not to storing all);
- ``memplan peak``: ``memplan_torch.Partitioner(P, budget_on="peak", on_infeasible="smallest")`` where P is the
  peak measured for the ``pytorch`` arm, in bytes (where P is below the smallest peak memplan's model of the region
  reaches, the arm trains at that smallest peak and its note says so);
- ``memplan f``: ``memplan_torch.Partitioner(f)``, memplan's fraction of the peak (``memplan plan --budget
  fraction:f``): f of the way from the smallest peak memplan reaches for the region (0) to its store-all arena (1)
  (the note compares the measured peak with that budget in bytes). Before 2026-12-06 this arm was ``saved:f``:
  the store-all arena less (1 - f) of the bytes store-all saves.

Each arm: the bytes its forward saves for the backward (the forward module's saved outputs that are not the
region's inputs), the measured peak of one step (``probe.peak_of``: the CPU allocator's events over the step,
which makes the gradients, plus the weights and the inputs resident), the median step time over ``--repeats`` steps after a warm-up (the
arms interleaved, step by step, each repeat starting at the next arm, so that no arm always follows the same one), compile seconds (the first call, Inductor's and aot_autograd's caches off and empty
kernel caches for each compile) with the partitioner's share, and the largest relative gradient difference against
eager PyTorch (``common.grad_diff``). Dropout is 0 in every model, so that the gradients compare. ``--dtype float64``
runs the models in double precision: a deep network with batch norm at a small batch (ResNet-50) amplifies float32's
round-off until eager and any compiled step differ by far more than 1e-4 whatever the partition, and float64 shows
what the partition itself does to the gradients.

Models: torchvision ResNet-50 (batch 8, 224x224), Hugging Face GPT-2 small (12 layers, hidden 768, 2 x 256
tokens), a Hugging Face Llama (4 layers, hidden 512, 8 heads, 4 KV heads, FFN 1376, vocabulary 32000, 2 x 256),
torchvision ViT-B/16 (batch 4, 224x224)."""
from __future__ import annotations

import argparse
import copy
import os
import statistics
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)

from common import emit, grad_diff, isolated, log, row_printer, table_parser  # noqa: E402

import torch  # noqa: E402
import torchvision  # noqa: E402

MODELS = ["resnet50", "gpt2", "llama", "vit_b_16"]


def build(name: str):
    """(model in train mode, inputs, targets, loss_fn(model, inputs, targets) -> loss)."""
    torch.manual_seed(0)
    g = torch.Generator().manual_seed(0)
    if name in ("resnet50", "vit_b_16"):
        batch = 8 if name == "resnet50" else 4
        model = getattr(torchvision.models, name)().train()
        x, y = torch.randn(batch, 3, 224, 224, generator=g), torch.randint(0, 1000, (batch,), generator=g)
        return model, (x,), (y,), lambda m, i, t: torch.nn.functional.cross_entropy(m(*i), *t)
    import transformers as tf
    if name == "gpt2":
        model = tf.GPT2LMHeadModel(tf.GPT2Config(resid_pdrop=0.0, embd_pdrop=0.0, attn_pdrop=0.0))
        # transformers warns once about GPT-2's unset loss type, and Dynamo's full graph cannot trace the warning
        model.loss_type = "ForCausalLM"
        vocab = 50257
    elif name == "llama":
        model = tf.LlamaForCausalLM(tf.LlamaConfig(num_hidden_layers=4, hidden_size=512, intermediate_size=1376,
                                                   num_attention_heads=8, num_key_value_heads=4, vocab_size=32000))
        vocab = 32000
    else:
        raise SystemExit(f"unknown model '{name}' (known: {', '.join(MODELS)})")
    ids = torch.randint(0, vocab, (2, 256), generator=g)
    return model.train(), (ids,), (ids,), lambda m, i, t: m(*i, labels=t[0]).loss


class Recording:
    """Wraps a partitioner: records the bytes the forward module saves for the backward and its seconds."""

    def __init__(self, inner):
        from torch._inductor.custom_graph_pass import CustomPartitionerFn
        base = self

        class Fn(CustomPartitionerFn):
            def __call__(self, gm, joint_inputs, **kw):
                t = time.perf_counter()
                fw, bw = inner(gm, joint_inputs, **kw)
                base.seconds += time.perf_counter() - t
                outs = fw.graph.output_node().args[0][kw["num_fwd_outputs"]:]
                base.saved += sum(_nbytes(n) for n in outs if n.op != "placeholder")
                return fw, bw

            def uuid(self):
                return None  # no caching
        self.fn, self.seconds, self.saved = Fn(), 0.0, 0


def _nbytes(n) -> int:
    v = n.meta.get("val")
    return v.untyped_storage().nbytes() if isinstance(v, torch.Tensor) else 0


_CACHES = tempfile.TemporaryDirectory(prefix="memplan-inductor-")  # the compiles' kernel caches, removed at exit


def compiled(model, loss_fn, inputs, targets, partitioner, budget=None):
    """(compiled step, compile seconds): a step of its own (Dynamo caches compiled frames per code object)."""
    import torch._dynamo
    import torch._functorch.config as fconfig
    import torch._inductor.config as iconfig
    ns = {"model": model, "loss_fn": loss_fn}
    exec(f"def step_{id(partitioner)}(i, t):\n    return loss_fn(model, i, t)\n", ns)
    fn = torch.compile(ns[f"step_{id(partitioner)}"], fullgraph=True)
    patches = dict(activation_memory_budget=budget) if budget is not None else {}
    # Each compile from empty kernel caches (in memory and on disk), so that no arm reuses another's kernels.
    from torch._inductor.utils import clear_caches
    clear_caches()
    os.environ["TORCHINDUCTOR_CACHE_DIR"] = tempfile.mkdtemp(prefix="memplan-inductor-", dir=_CACHES.name)
    with iconfig.patch(custom_partitioner_fn=partitioner, fx_graph_cache=False), \
            fconfig.patch(enable_autograd_cache=False, **patches):
        t = time.perf_counter()
        fn(inputs, targets).backward()
        seconds = time.perf_counter() - t
    model.zero_grad(set_to_none=True)
    return fn, seconds


def _inner(e: Exception) -> str:
    """The error a failed compile reports: Dynamo's BackendCompilerFailed wraps memplan's."""
    inner = getattr(e, "inner_exception", None) or e
    return f"{type(inner).__name__}: {str(inner).strip().splitlines()[0][:240]}"


def one(name: str, f: float, repeats: int, dtype: str = "float32", time_limit: float | None = None,
        cost: str | None = None) -> dict:
    from torch._functorch.partitioners import min_cut_rematerialization_partition

    from memplan_torch import Partitioner
    from memplan_torch.probe import peak_of, storage_bytes
    # Inductor's one-time start-up (imports, the C++ toolchain's first run) on a small step first, so that the
    # first arm's compile time is not charged with it.
    tiny = torch.nn.Sequential(torch.nn.Linear(8, 8), torch.nn.GELU(), torch.nn.Linear(8, 2))
    compiled(tiny, lambda m, i, t: torch.nn.functional.cross_entropy(m(*i), *t), (torch.randn(4, 8),),
             (torch.tensor([0, 1, 0, 1]),), Recording(min_cut_rematerialization_partition).fn)
    model, inputs, targets, loss_fn = build(name)
    if dtype != "float32":
        model = model.to(getattr(torch, dtype))
        inputs = tuple(i.to(getattr(torch, dtype)) if i.is_floating_point() else i for i in inputs)
    ref = copy.deepcopy(model)
    loss_fn(ref, inputs, targets).backward()
    resident = storage_bytes(list(model.parameters()) + list(model.buffers()) + list(inputs) + list(targets))
    arms = {}

    def add(label, rec, budget=None, planner=None):
        log(f"{name} f={f}: compiling ({label})")
        fn, seconds = compiled(model, loss_fn, inputs, targets, rec.fn, budget)
        step = (lambda fn=fn: fn(inputs, targets).backward())
        model.zero_grad(set_to_none=True)
        step()
        diff, missing = grad_diff(model, ref)
        model.zero_grad(set_to_none=True)
        peak = peak_of(step, resident)[0]  # the gradients are made during the step
        model.zero_grad(set_to_none=True)
        arms[label] = {"step": step, "saved": rec.saved, "peak": peak, "compile": seconds,
                       "partition": rec.seconds, "grad": diff, "missing": missing, "times": [],
                       "planner": planner}
    add("pytorch", Recording(min_cut_rematerialization_partition), budget=f)
    # The same arm again, compiled afresh: the spread of two identical arms is the noise a difference
    # between arms must exceed.
    add("pytorch again", Recording(min_cut_rematerialization_partition), budget=f)
    limit = {} if time_limit is None else {"time_limit": time_limit}  # else the Partitioner's defaults
    if cost is not None:
        limit["cost"] = cost
    saved = Partitioner(max(arms["pytorch"]["saved"], 1), budget_on="saved", **limit)
    add("memplan saved", Recording(saved), planner=saved)
    # PyTorch's peak can lie below the smallest peak memplan's model of the region reaches: the arm then trains
    # at that smallest peak (on_infeasible="smallest"), and its row says so.
    peak = Partitioner(arms["pytorch"]["peak"], budget_on="peak", on_infeasible="smallest", **limit)
    try:
        add("memplan peak", Recording(peak), planner=peak)
    except Exception as e:  # noqa: BLE001 - an infeasible peak is a row too
        arms["memplan peak"] = {"error": _inner(e)}
    own = Partitioner(f, budget_on="peak", **limit)
    try:
        add("memplan f", Recording(own), planner=own)
    except Exception as e:  # noqa: BLE001
        arms["memplan f"] = {"error": _inner(e)}
    live = [a for a in arms.values() if "step" in a]
    for a in live:  # warm-up
        a["step"]()
        model.zero_grad(set_to_none=True)
    for r in range(repeats):
        for a in live[r % len(live):] + live[:r % len(live)]:  # each repeat starts at the next arm
            t = time.perf_counter()
            a["step"]()
            a["times"].append(time.perf_counter() - t)
            model.zero_grad(set_to_none=True)
    out = {}
    for label, a in arms.items():
        if "error" in a:
            out[label] = a
            continue
        p = a["planner"]
        out[label] = {"saved": a["saved"], "peak": a["peak"], "time": statistics.median(a["times"]),
                      "compile": a["compile"], "partition": a["partition"], "grad": a["grad"],
                      "missing": a["missing"],
                      "budget": p.partitions[-1].budget if p is not None and p.partitions else None,
                      "arena": p.partitions[-1].plan["arena_bytes"] if p is not None and p.partitions else None,
                      "regions": len(p.partitions) if p is not None else None,
                      "smallest": bool(p is not None and p.partitions and
                                       (p.partitions[-1].report.get("smallest") or {}).get("used"))}
    out["pytorch budget peak"] = arms["pytorch"]["peak"]
    return out


def main() -> None:
    ap = table_parser(MODELS)
    ap.add_argument("--budgets", default="1.0,0.7,0.5,0.3", help="fractions f (activation_memory_budget)")
    ap.add_argument("--repeats", type=int, default=20)
    ap.add_argument("--dtype", default="float32", choices=["float32", "float64"],
                    help="the models' weights and inputs (float64: gradients free of float32's round-off)")
    ap.add_argument("--time-limit", type=float, help="memplan's arms: Partitioner(time_limit=S) (default: its own)")
    ap.add_argument("--cost", help="memplan's arms: Partitioner(cost=MODEL) (default: its own)")
    ap.add_argument("--one", help=argparse.SUPPRESS)  # a child process: one model at this fraction
    args = ap.parse_args()
    if args.one:
        emit(one(args.models[0], float(args.one), args.repeats, args.dtype, args.time_limit, args.cost))
        return
    header = ["model", "f", "arm", "saved MiB", "peak MiB", "step ms", "compile s", "partitioner s (share)",
              "grad rel diff", "note"]
    put = row_printer(header, args.out)
    peaks: dict = {}  # (model, arm) -> [(f, measured peak)]
    for name in args.models:
        for f in [float(x) for x in args.budgets.split(",")]:
            try:
                r = isolated(os.path.abspath(__file__),
                             [name, f"--one={f}", f"--repeats={args.repeats}", f"--dtype={args.dtype}"]
                             + ([f"--time-limit={args.time_limit}"] if args.time_limit is not None else [])
                             + ([f"--cost={args.cost}"] if args.cost is not None else []))
            except Exception as e:  # noqa: BLE001 - a failing configuration must not stop the others
                put([name, f"{f}", "-", "-", "-", "-", "-", "-", "-", f"FAILED: {e}"])
                continue
            spread = abs(r["pytorch"]["time"] - r["pytorch again"]["time"]) / r["pytorch"]["time"]
            for label in ("pytorch", "pytorch again", "memplan saved", "memplan peak", "memplan f"):
                a = r[label]
                if "error" in a:
                    put([name, f"{f}", label, "-", "-", "-", "-", "-", "-", a["error"].replace("|", "/")])
                    continue
                note = ""
                budget = r["pytorch budget peak"] if label == "memplan peak" else a.get("budget")
                if label in ("memplan peak", "memplan f") and isinstance(budget, int):
                    note = (f"budget {budget / 2**20:.1f} MiB, plan {a['arena'] / 2**20:.1f} MiB; measured peak "
                            + ("within the budget" if a["peak"] <= budget else
                               f"ABOVE the budget by {(a['peak'] - budget) / 2**20:.1f} MiB"))
                if a.get("smallest"):
                    note += (f"; below the smallest peak memplan's model reaches ({a['arena'] / 2**20:.1f} MiB): "
                             "trained at it (on_infeasible='smallest')")
                if a.get("regions") and a["regions"] > 1:
                    note += f"; {a['regions']} regions"
                if label == "pytorch again":
                    note = f"spread of the two pytorch arms: {100 * spread:.1f} %"
                elif label != "pytorch" and "time" in a:
                    slower = a["time"] / r["pytorch"]["time"] - 1
                    note += ("; " if note else "") + f"{100 * slower:+.1f} % vs pytorch" + (
                        " (beyond the spread)" if slower > spread else "")
                # Ordered by the budget the arm planned for where it has one in bytes (a peak budget), else by f.
                peaks.setdefault((name, label), []).append((budget if label in ("memplan peak", "memplan f")
                                                            and isinstance(budget, int) else f, f, a["peak"]))
                put([name, f"{f}", label, f"{a['saved'] / 2**20:.1f}", f"{a['peak'] / 2**20:.1f}",
                     f"{1e3 * a['time']:.1f}", f"{a['compile']:.1f}",
                     f"{a['partition']:.2f} ({100 * a['partition'] / a['compile']:.0f} %)",
                     f"{a['grad']:.1e}" + (f" ({a['missing']} missing)" if a["missing"] else ""), note])

    monotone_summary(peaks, args.out)


def monotone_summary(peaks: dict, path=None) -> None:
    """For each model and arm, the measured peaks as its budget falls (the peak budget in bytes, or f for
    the arms budgeted on saved bytes), and whether they never rise."""
    lines = ["", "Measured peaks as the budget falls (f: MiB), and whether they never rise:", ""]
    for (name, label), points in peaks.items():
        points = sorted(points, key=lambda p: -p[0])
        ok = all(b[2] <= a[2] for a, b in zip(points, points[1:]))
        lines.append(f"- {name}, {label}: " + ", ".join(f"{f}: {p / 2**20:.1f}" for _, f, p in points)
                     + (" (monotone)" if ok else " (NOT monotone)"))
    print("\n".join(lines), flush=True)
    if path:
        with open(path, "a") as f:
            f.write("\n".join(lines) + "\n")

if __name__ == "__main__":
    main()
