"""The zoo's `llama` against Hugging Face's LlamaForCausalLM of the same configuration, byte for byte.

    build/venv/bin/python bench/torch/llama_crosscheck.py [--rows tiny,8b-2L,1b-2L] [--workdir DIR]

For each row it writes the configuration as a config.json, exports Hugging Face's model with the frontend's
meta-device path (python -m memplan_torch export --model transformers:LlamaForCausalLM --device meta, bf16,
AdamW, roofline:h100), builds `memplan zoo llama` with the same sizes (--precision pure: the export keeps the
moments in bf16 and no master copy), and compares the census of the two graphs (`memplan stats --json`,
graph/census.hpp): weights, optimizer state, weight gradients and activations saved for the backward pass.

The saved activations differ by what eager Hugging Face keeps that the zoo's fused layers do not. The bench
prices each term by formula and prints what is left unexplained (bytes; 2 = bf16, 4 = fp32; s*b tokens,
widths h, kv = kv_heads * head_dim, F, vocabulary V, L layers, head width d):
  per layer   8sbh      two RMSNorms that upcast: x kept in fp32 (4sbh, not 2sbh) and the normalised x cast
                        back to bf16 before the weight (2sbh) beside the output
              4sb(h-kv) K and V expanded to every query head (repeat_kv) before the attention kernel
              2bs^2     the causal mask as a bf16 (b, 1, s, s) tensor, made per layer, read by the backward
              2sbF      silu(gate) as its own tensor (no fused SwiGLU)
  once        4sbh      the final RMSNorm's upcast
              2sbV      the logits made fp32 before the loss (log-probabilities 4sbV, not 2sbV)
              8sb + 8   the shifted labels (int64) and the loss's two scalars; Hugging Face pads the labels by
                        one and slices: with batch 1 the slice is contiguous and the padded 8(s+1) is kept
              4sd       rotary cos and sin tables (bf16, 1 x s x d each)
Weights differ by the token and label inputs (persistent in the export, 8sb each) and the rotary inv_freq
buffer (d/2 fp32). With tied embeddings the export's update of the shared table reads both gradient
contributions (the embedding's and the LM head's, summed inside the update), so one more table-sized
gradient (2Vh) exists; the zoo sums them in place before the update.
Exit status 1 when a row's unexplained difference is not zero or weights, optimizer state or gradients
differ by more than 2 %.
"""
from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
MEMPLAN = os.environ.get("MEMPLAN", os.path.join(ROOT, "build", "bin", "memplan"))

# name: (layers, hidden, heads, kv_heads, ffn, vocab, tied, batch, seq)
ROWS = {
    "tiny": (2, 64, 4, 2, 176, 512, False, 2, 128),
    "8b-2L": (2, 4096, 32, 8, 14336, 128256, False, 1, 4096),
    "1b-2L": (2, 2048, 32, 8, 8192, 128256, True, 2, 1024),
}


def run(cmd, env=None):
    t = time.perf_counter()
    p = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=env)
    if p.returncode != 0:
        sys.exit(f"failed ({p.returncode}): {' '.join(cmd)}\n{p.stdout[-3000:]}")
    return p.stdout, time.perf_counter() - t


def stats(path):
    out, _ = run([MEMPLAN, "stats", path, "--json"])
    return json.loads(out)


def explained_saved(L, h, heads, kv_heads, F, V, b, s):
    d = h // heads
    kv = kv_heads * d
    sb = s * b
    per_layer = 8 * sb * h + 4 * sb * (h - kv) + 2 * b * s * s + 2 * sb * F
    labels = 8 * (s + 1) if b == 1 else 8 * sb
    once = 4 * sb * h + 2 * sb * V + labels + 8 + 4 * s * d
    return L * per_layer + once


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--rows", default=",".join(ROWS), help="comma-separated: " + ", ".join(ROWS))
    ap.add_argument("--workdir", default=None, help="where the graphs go (default: a temporary folder)")
    a = ap.parse_args()
    work = a.workdir or tempfile.mkdtemp(prefix="llama_crosscheck_")
    os.makedirs(work, exist_ok=True)
    env = dict(os.environ)
    env["PYTHONPATH"] = os.path.join(ROOT, "python") + os.pathsep + env.get("PYTHONPATH", "")
    failed = False
    print("| row | what | zoo | Hugging Face | difference | explained | unexplained |")
    print("|---|---|---:|---:|---:|---:|---:|")
    for name in a.rows.split(","):
        L, h, heads, kvh, F, V, tied, b, s = ROWS[name]
        cfg = {"model_type": "llama", "hidden_size": h, "intermediate_size": F, "num_hidden_layers": L,
               "num_attention_heads": heads, "num_key_value_heads": kvh, "vocab_size": V,
               "max_position_embeddings": max(8192, s), "rope_theta": 500000.0, "rms_norm_eps": 1e-5,
               "tie_word_embeddings": tied}
        cfg_path = os.path.join(work, name + ".config.json")
        with open(cfg_path, "w") as f:
            json.dump(cfg, f)
        hf_path = os.path.join(work, name + ".hf.json")
        zoo_path = os.path.join(work, name + ".zoo.json")
        _, hf_s = run([sys.executable, "-m", "memplan_torch", "export", "--model", "transformers:LlamaForCausalLM",
                       "--config", cfg_path, "--device", "meta", "--seq", str(s), "--batch", str(b), "--dtype",
                       "bf16", "--optimizer", "adamw", "--cost", "roofline:h100", "-o", hf_path], env)
        _, zoo_s = run([MEMPLAN, "zoo", "llama", "--layers", str(L), "--hidden", str(h), "--heads", str(heads),
                        "--kv-heads", str(kvh), "--ffn", str(F), "--vocab", str(V),
                        "--tied" if tied else "--untied", "--batch", str(b), "--seq", str(s), "--dtype", "bf16",
                        "--optimizer", "adamw", "--precision", "pure", "--cost", "roofline:h100", "-o", zoo_path])
        z, hf = stats(zoo_path), stats(hf_path)
        d = h // heads
        rows = [
            ("weights", "weight_bytes", 2 * 8 * s * b + 4 * (d // 2)),
            ("optimizer state", "optimizer_state_bytes", 0),
            ("weight gradients", "weight_gradient_bytes", 2 * V * h if tied else 0),
            ("saved for backward", "saved_activation_bytes", explained_saved(L, h, heads, kvh, F, V, b, s)),
        ]
        for what, key, explained in rows:
            diff = hf[key] - z[key]
            left = diff - explained
            rel = diff / z[key] if z[key] else 0.0
            print(f"| {name} (b{b} s{s}) | {what} | {z[key]:,} | {hf[key]:,} | {diff:+,} ({100 * rel:+.2f} %) "
                  f"| {explained:+,} | {left:+,} |")
            if left != 0 or (what in ("weights", "optimizer state") and abs(rel) > 0.02):
                failed = True
        print(f"|  | seconds to build | {zoo_s:.1f} | {hf_s:.1f} |  |  |  |", flush=True)
    print(f"graphs in {work}")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
