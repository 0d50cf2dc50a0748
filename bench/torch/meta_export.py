"""Export time and peak memory of a meta-device export: a Llama-3-8B-shaped decoder in plain PyTorch
(python/tests/decoder.py: 32 layers, hidden 4096, 32 heads, 8 KV heads, FFN 14336, vocabulary 128256), built on
the meta device in bf16, one training step at batch 1 x seq 4096 with AdamW, priced by roofline:h100.

    build/venv/bin/python bench/torch/meta_export.py --layers 2 [--seq 4096] [--batch 1] [--plan]

One process per run (the peak RSS is the process's): prints one line with the seconds of each phase (build,
trace, graph), the FX nodes, the graph's ops and tensors, the parameters, and the peak RSS (ru_maxrss); the
peak RSS after importing torch is printed beside it. Targets for 32 layers: <= 60 s and <= 4 GB."""
from __future__ import annotations

import argparse
import json
import os
import resource
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
sys.path.insert(0, os.path.join(ROOT, "python"))
sys.path.insert(0, os.path.join(ROOT, "python", "tests"))
os.environ.setdefault("MEMPLAN", os.path.join(ROOT, "build", "bin", "memplan"))


def rss_gb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024 / 1e9  # Linux: kilobytes


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--layers", type=int, default=32)
    ap.add_argument("--seq", type=int, default=4096)
    ap.add_argument("--batch", type=int, default=1)
    ap.add_argument("--cost", default="roofline:h100")
    ap.add_argument("--fake-device", default="cpu")
    ap.add_argument("--plan", action="store_true", help="also memplan stats of the graph")
    ap.add_argument("-o", "--output", help="write the graph")
    a = ap.parse_args()

    import torch
    import memplan_torch as mt  # noqa: F401
    from memplan_torch import meta
    import decoder
    base = rss_gb()

    marks = [("start", time.perf_counter())]
    model = decoder.build(decoder.llama3_8b(a.layers), "meta", torch.bfloat16)
    marks.append(("build", time.perf_counter()))
    ids = torch.empty(a.batch, a.seq, dtype=torch.long, device="meta")

    def progress(s):
        if s.startswith("building the memplan graph"):
            marks.append(("trace", time.perf_counter()))
        print(f"  {s}", file=sys.stderr)

    g, joint, _ = meta.export_with_mapping(model, (ids,), targets=(ids,), optimizer="adamw", cost=a.cost,
                                           progress=progress, fake_device=a.fake_device)
    marks.append(("graph", time.perf_counter()))
    phases = ", ".join(f"{n} {t - marks[i][1]:.1f} s" for i, (n, t) in enumerate(marks[1:]))
    total = marks[-1][1] - marks[0][1]
    params = g["memplan_torch"]["parameters"]
    print(f"meta export, decoder {a.layers} layers, b{a.batch} x s{a.seq}, bf16, adamw, {a.cost}: "
          f"{total:.1f} s ({phases}), {len(joint.gm.graph.nodes)} FX nodes, {len(g['ops'])} ops, "
          f"{len(g['tensors'])} tensors, {params / 1e9:.2f} B parameters, peak RSS {rss_gb():.2f} GB "
          f"(after importing torch {base:.2f} GB)")
    if a.output:
        with open(a.output, "w") as f:
            json.dump(g, f)
    if a.plan:
        from memplan_torch import command
        t = time.perf_counter()
        s = command.stats(g)
        print(f"memplan stats: LB default schedule {s['lb_default'] / 2**30:.1f} GiB, persistent "
              f"{s['persistent'] / 2**30:.1f} GiB ({time.perf_counter() - t:.1f} s)")


if __name__ == "__main__":
    main()
