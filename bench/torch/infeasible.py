"""What a user sees when a byte budget is below the smallest peak memplan reaches under torch.compile.

    build/venv/bin/python bench/torch/infeasible.py [--budget 1000000] [--smallest]

A Hugging Face Llama (2 layers, hidden 128, 4 heads, 2 KV heads, vocabulary 8000, batch 2 x 64 tokens), its
training step compiled with ``memplan_torch.Partitioner(budget)``; prints the exception torch.compile raises
(``BackendCompilerFailed``, its memplan error: the smallest peak memplan reached and what is live there). With
``--smallest``: ``on_infeasible="smallest"`` instead, and the warning it gives."""
from __future__ import annotations

import argparse
import os
import sys
import warnings

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import common  # noqa: E402,F401  (sets up the paths)

import torch  # noqa: E402
import transformers as tf  # noqa: E402


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--budget", type=int, default=1_000_000)
    ap.add_argument("--smallest", action="store_true")
    args = ap.parse_args()
    import torch._inductor.config as iconfig
    import memplan_torch as mt
    torch.manual_seed(0)
    model = tf.LlamaForCausalLM(tf.LlamaConfig(vocab_size=8000, hidden_size=128, intermediate_size=256,
                                               num_hidden_layers=2, num_attention_heads=4, num_key_value_heads=2))
    ids = torch.randint(0, 8000, (2, 64), generator=torch.Generator().manual_seed(0))

    def step(ids):
        return model(input_ids=ids, labels=ids).loss

    part = mt.Partitioner(args.budget, on_infeasible="smallest" if args.smallest else "fail")
    with iconfig.patch(custom_partitioner_fn=part), warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        try:
            torch.compile(step)(ids).backward()
            print("compiled")
        except Exception as e:  # noqa: BLE001 - what the user sees is the point
            print(f"{type(e).__name__}: {e}")
    for w in caught:
        if "memplan" in str(w.message):
            print(f"{w.category.__name__}: {w.message}")


if __name__ == "__main__":
    main()
