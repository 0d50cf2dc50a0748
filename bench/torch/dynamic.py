"""memplan's partitioner under dynamic shapes: one compile serving several sequence lengths.

    build/venv/bin/python bench/torch/dynamic.py [--lengths 32,48,64,80] [--budget 0.5] [--time-limit 2]

A Hugging Face Llama (2 layers, hidden 256, 4 heads, 2 KV heads, vocabulary 4000, batch 2), its training step
``model(ids, labels=ids).loss`` compiled once with ``torch.compile(..., dynamic=True)`` and
``memplan_torch.Partitioner(budget)``, then run at each length in turn (the first one is the length Dynamo traces,
and memplan plans at). For each length: the compiles so far (the partitioner's calls) and Dynamo's frame compiles,
the largest relative gradient difference against eager PyTorch at that length (``common.grad_diff``), the step's
measured CPU peak (``probe.peak_of``, weights and inputs resident) and the plan's live peak at that length
(``Partitioner.peak_at``: the same partition's steps on the region's graph with its sizes at that length; at the
traced length, the plan memplan made), and the budget in bytes memplan planned for (at the traced length)."""
from __future__ import annotations

import argparse
import copy
import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)

from common import grad_diff, log, row_printer  # noqa: E402

import torch  # noqa: E402
import transformers as tf  # noqa: E402

HEADER = ["length", "partitioner calls", "frames compiled", "grad rel diff", "measured peak MiB",
          "plan's peak MiB", "measured - plan bytes", "budget MiB (traced length)"]


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--lengths", default="32,48,64,80")
    ap.add_argument("--budget", type=float, default=0.5)
    ap.add_argument("--time-limit", type=float, default=2.0)
    ap.add_argument("--out")
    args = ap.parse_args()
    import torch._dynamo
    import torch._inductor.config as iconfig
    import memplan_torch as mt
    from memplan_torch.probe import peak_of, storage_bytes
    torch.manual_seed(0)
    cfg = tf.LlamaConfig(num_hidden_layers=2, hidden_size=256, intermediate_size=1024, num_attention_heads=4,
                         num_key_value_heads=2, vocab_size=4000, max_position_embeddings=512)
    model = tf.LlamaForCausalLM(cfg).train()
    ref = copy.deepcopy(model)
    part = mt.Partitioner(args.budget, time_limit=args.time_limit)

    def step(ids):
        return model(input_ids=ids, labels=ids).loss

    torch._dynamo.reset()
    compiled = torch.compile(step, dynamic=True)
    put = row_printer(HEADER, args.out)
    mib = lambda b: f"{b / 2**20:.2f}"  # noqa: E731
    g = torch.Generator().manual_seed(1)
    with iconfig.patch(custom_partitioner_fn=part, fx_graph_cache=False):
        for length in [int(x) for x in args.lengths.split(",")]:
            log(f"length {length}")
            ids = torch.randint(0, 4000, (2, length), generator=g)
            model.zero_grad(set_to_none=True)
            ref.zero_grad(set_to_none=True)
            compiled(ids).backward()
            step_ref = ref(input_ids=ids, labels=ids).loss
            step_ref.backward()
            diff, _ = grad_diff(model, ref)
            model.zero_grad(set_to_none=True)
            resident = storage_bytes(list(model.parameters()) + list(model.buffers()) + [ids])
            peak = peak_of(lambda: compiled(ids).backward(), resident)[0]
            model.zero_grad(set_to_none=True)
            p = part.partitions[-1]
            # Dynamo's symbols for the batch and the length: the sizes of the input ids, (2, length).
            sizes = {}
            for n in p.joint.gm.graph.nodes:
                v = n.meta.get("val")
                if n.op == "placeholder" and isinstance(v, torch.Tensor) and v.dim() == 2 and \
                        not v.is_floating_point() and all(isinstance(d, torch.SymInt) for d in v.shape):
                    sizes = {str(v.shape[0]): 2, str(v.shape[1]): length}
                    break
            if not sizes:
                raise SystemExit("no symbolic input ids in the region: were the shapes made dynamic?")
            plan_peak = part.peak_at(p, sizes)
            frames = torch._dynamo.utils.counters["stats"]["unique_graphs"]
            put([str(length), str(len(part.partitions)), str(frames), f"{diff:.1e}", mib(peak), mib(plan_peak),
                 f"{peak - plan_peak:+,d}", mib(p.budget)])


if __name__ == "__main__":
    main()
