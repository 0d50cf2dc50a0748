"""Export time and peak memory of a meta-device export: a Llama-3-8B-shaped decoder in plain PyTorch
(python/tests/decoder.py: 32 layers, hidden 4096, 32 heads, 8 KV heads, FFN 14336, vocabulary 128256), built on
the meta device in bf16, one training step at batch 1 x seq 4096 with AdamW, priced by roofline:h100.

    build/venv/bin/python bench/torch/meta_export.py --layers 2 [--seq 4096] [--batch 1] [--plan]

One process per run (the peak RSS is the process's): prints one line with the seconds of each phase (build,
trace, graph), the FX nodes, the graph's ops and tensors, the parameters, and the peak RSS (ru_maxrss); the
peak RSS after importing torch is printed beside it. Targets for 32 layers: <= 60 s and <= 4 GB.

With --hf CONFIG.json it runs the command line instead, each step as its own child process, and prints each
step's wall seconds, CPU seconds (user + system) and peak RSS (os.wait4's rusage of that child):

    build/venv/bin/python bench/torch/meta_export.py --hf llama3_8b.json --seq 4096 --batch 1 \
        --budget 80GB --time-limit 30 --workdir /tmp/fit [--no-store-all] [--export-timeout 360]

  1. python -m memplan_torch export --model transformers:LlamaForCausalLM --config CONFIG.json --device meta
     --seq S --batch B --dtype bf16 --optimizer adamw --cost roofline:h100 -o WORKDIR/TAG.graph.json
  2. memplan stats G.json
  3. memplan plan G.json --time-limit T            (store-all: no budget; its arena)
  4. memplan plan G.json --budget B --time-limit T -o WORKDIR/TAG.plan.json
  5. memplan check G.json P.json                   (when 4 wrote a plan)
The export is killed after --export-timeout seconds (the 70B guard)."""
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


def _run(cmd, timeout=None, env=None):
    """Runs cmd as a child; returns (rc, output, wall s, cpu s, peak RSS GB) from os.wait4's rusage."""
    import subprocess
    t = time.perf_counter()
    with open(os.devnull, "rb") as dn:
        p = subprocess.Popen(cmd, stdin=dn, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, env=env, text=True)
    out, killed = [], []
    import threading
    reader = threading.Thread(target=lambda: out.extend(p.stdout), daemon=True)
    reader.start()
    if timeout is not None:
        timer = threading.Timer(timeout, lambda: (killed.append(1), p.kill()))
        timer.start()
    _, status, ru = os.wait4(p.pid, 0)
    if timeout is not None:
        timer.cancel()
    p.returncode = os.waitstatus_to_exitcode(status)
    reader.join(5)
    wall = time.perf_counter() - t
    text = "".join(out) + ("\n[killed after the timeout]" if killed else "")
    return p.returncode, text, wall, ru.ru_utime + ru.ru_stime, ru.ru_maxrss * 1024 / 1e9


def hf_main(a) -> None:
    env = dict(os.environ)
    env["PYTHONPATH"] = os.path.join(ROOT, "python") + os.pathsep + env.get("PYTHONPATH", "")
    memplan = env["MEMPLAN"]
    tag = a.tag or f"{os.path.splitext(os.path.basename(a.hf))[0]}_b{a.batch}_s{a.seq}"
    os.makedirs(a.workdir, exist_ok=True)
    g = os.path.join(a.workdir, tag + ".graph.json")
    p = os.path.join(a.workdir, tag + ".plan.json")

    def step(name, cmd, timeout=None, show=True):
        print(f"$ {' '.join(cmd)}", flush=True)
        rc, out, wall, cpu, rss = _run(cmd, timeout, env)
        if show:
            print("\n".join("  " + ln for ln in out.rstrip().splitlines()[-40:]))
        print(f"[{name}] rc {rc}, wall {wall:.1f} s, cpu {cpu:.1f} s, peak RSS {rss:.2f} GB", flush=True)
        return rc, out

    rc, _ = step("export", [sys.executable, "-m", "memplan_torch", "export", "--model",
                            "transformers:LlamaForCausalLM", "--config", a.hf, "--device", "meta",
                            "--seq", str(a.seq), "--batch", str(a.batch), "--dtype", "bf16", "--optimizer", "adamw",
                            "--cost", a.cost, "-o", g], timeout=a.export_timeout)
    if rc != 0:
        return
    step("stats", [memplan, "stats", g])
    if not a.no_store_all:
        step("store-all", [memplan, "plan", g, "--time-limit", str(a.time_limit)])
    if a.budget:
        if os.path.exists(p):
            os.remove(p)
        rc, _ = step("budget", [memplan, "plan", g, "--budget", a.budget, "--time-limit", str(a.time_limit),
                                "-o", p])
        if os.path.exists(p):
            step("check", [memplan, "check", g, p])


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--hf", metavar="CONFIG.json", help="run the command line on LlamaForCausalLM of this config")
    ap.add_argument("--budget", help="with --hf: memplan plan --budget (e.g. 80GB = 80e9 bytes)")
    ap.add_argument("--time-limit", type=int, default=30)
    ap.add_argument("--workdir", default="/tmp/memplan-meta-fit")
    ap.add_argument("--tag")
    ap.add_argument("--no-store-all", action="store_true")
    ap.add_argument("--export-timeout", type=float, default=360)
    ap.add_argument("--layers", type=int, default=32)
    ap.add_argument("--seq", type=int, default=4096)
    ap.add_argument("--batch", type=int, default=1)
    ap.add_argument("--cost", default="roofline:h100")
    ap.add_argument("--fake-device", default="cpu")
    ap.add_argument("--plan", action="store_true", help="also memplan stats of the graph")
    ap.add_argument("-o", "--output", help="write the graph")
    a = ap.parse_args()
    if a.hf:
        return hf_main(a)

    import torch
    import memplan_torch as mt  # noqa: F401
    from memplan_torch.graph.step_graph import export_step
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

    g, joint, _ = export_step(model, (ids,), targets=(ids,), optimizer="adamw", cost=a.cost, progress=progress,
                              fake_device=a.fake_device)
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
              f"{s['persistent_bytes'] / 2**30:.1f} GiB ({time.perf_counter() - t:.1f} s)")


if __name__ == "__main__":
    main()
