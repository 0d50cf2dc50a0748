"""Hugging Face transformer families through memplan_torch: export, plan, train one step with the plan.

    build/venv/bin/python bench/torch/hf_families.py [--hidden 256] [--vocab 4000] [--batch 2] [--seq 128]
                                                     [--budget 0.5] [FAMILY ...]

Each family at 2 layers, dropout 0, its own loss (``loss_fn="model"``, labels = the inputs; ViT: classes), one
line a family: the graph's ops, export seconds (trace, workspaces measured on the CPU), the plan's status under
``budget`` (a budget on the bytes saved for the backward, ``budget_on="saved"``) and ``memplan check``'s verdict,
recomputed ops, the largest relative gradient difference from eager PyTorch's step, and the measured peak
against the plan's prediction. A family that fails prints its one-line error."""
from __future__ import annotations

import argparse
import copy
import os
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from common import grad_diff, planned_peak  # noqa: E402  (sets up the paths)

import torch  # noqa: E402
import transformers as tf  # noqa: E402

import memplan_torch as mt  # noqa: E402

FAMILIES = ["gpt2", "llama", "qwen2", "mistral", "bert", "roberta", "t5", "vit"]


def build(name: str, h: int, vocab: int, batch: int, seq: int):
    torch.manual_seed(0)
    dec = dict(num_hidden_layers=2, hidden_size=h, intermediate_size=4 * h, num_attention_heads=4,
               num_key_value_heads=2, vocab_size=vocab, max_position_embeddings=seq)
    enc = dict(num_hidden_layers=2, hidden_size=h, intermediate_size=4 * h, num_attention_heads=4, vocab_size=vocab,
               max_position_embeddings=seq + 2, hidden_dropout_prob=0.0, attention_probs_dropout_prob=0.0)
    if name == "gpt2":
        m = tf.GPT2LMHeadModel(tf.GPT2Config(n_layer=2, n_embd=h, n_head=4, vocab_size=vocab, n_positions=seq,
                                             resid_pdrop=0.0, embd_pdrop=0.0, attn_pdrop=0.0))
    elif name == "llama":
        m = tf.LlamaForCausalLM(tf.LlamaConfig(**dec))
    elif name == "qwen2":
        m = tf.Qwen2ForCausalLM(tf.Qwen2Config(**dec))
    elif name == "mistral":
        m = tf.MistralForCausalLM(tf.MistralConfig(**dec))
    elif name == "bert":
        m = tf.BertForMaskedLM(tf.BertConfig(**enc))
    elif name == "roberta":
        m = tf.RobertaForMaskedLM(tf.RobertaConfig(**enc, pad_token_id=1))
    elif name == "t5":
        m = tf.T5ForConditionalGeneration(tf.T5Config(vocab_size=vocab, d_model=h, d_kv=h // 4, d_ff=4 * h,
                                                      num_layers=2, num_heads=4, dropout_rate=0.0,
                                                      decoder_start_token_id=0))
    elif name == "vit":
        m = tf.ViTForImageClassification(tf.ViTConfig(hidden_size=h, num_hidden_layers=2, num_attention_heads=4,
                                                      intermediate_size=4 * h, image_size=64, patch_size=8,
                                                      num_labels=10, hidden_dropout_prob=0.0,
                                                      attention_probs_dropout_prob=0.0))
        g = torch.Generator().manual_seed(0)
        return m.train(), (torch.randn(batch, 3, 64, 64, generator=g),), (torch.randint(0, 10, (batch,), generator=g),)
    else:
        raise SystemExit(f"unknown family '{name}' (known: {', '.join(FAMILIES)})")
    ids = torch.randint(0, vocab, (batch, seq), generator=torch.Generator().manual_seed(0))
    return m.train(), (ids,), (ids,)


def row(name: str, args) -> str:
    model, inputs, targets = build(name, args.hidden, args.vocab, args.batch, args.seq)
    ref = copy.deepcopy(model)
    mt.step_loss(ref, "model", inputs, targets).backward()
    t0 = time.perf_counter()
    try:
        cm = mt.compile(model, args.budget, inputs, targets=targets, loss_fn="model", budget_on="saved",
                        time_limit=args.time_limit)
    except (mt.ExportError, mt.MemplanError) as e:
        return f"{name}: FAILED after {time.perf_counter() - t0:.1f} s: {type(e).__name__}: {e}"
    ok, _ = mt.command.check(cm.graph, cm.plan, cm.budget_on)
    cm(*inputs, *targets).backward()
    worst, missing = grad_diff(model, ref)
    peak = planned_peak(cm, inputs, targets)
    pred = cm.schedule.live_peak
    return (f"{name}: {len(cm.graph['ops'])} ops, export {cm.seconds['export']:.1f} s, plan "
            f"{cm.seconds['plan']:.1f} s, check {'valid' if ok else 'INVALID'}, "
            f"{len(cm.schedule.recomputed)} ops recomputed, grads max rel diff {worst:.1e}"
            f"{f', {missing} MISSING' if missing else ''}, peak {peak / 2**20:.2f} MiB vs predicted "
            f"{pred / 2**20:.2f} MiB ({100 * (peak / pred - 1):+.2f} %)")


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("families", nargs="*", default=FAMILIES)
    ap.add_argument("--hidden", type=int, default=256)
    ap.add_argument("--vocab", type=int, default=4000)
    ap.add_argument("--batch", type=int, default=2)
    ap.add_argument("--seq", type=int, default=128)
    ap.add_argument("--budget", type=float, default=0.5)
    ap.add_argument("--time-limit", type=float, default=2.0)
    args = ap.parse_args()
    for name in args.families:
        print(row(name, args), flush=True)


if __name__ == "__main__":
    main()
