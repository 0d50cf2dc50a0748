"""Meta-device export: a model built without memory exports through fake tensors, allocates nothing, and gives
the graph the same model gives on real tensors; bad input is named."""
import json
import re

import pytest
import torch
import torch.nn as nn

import memplan_torch as mt
from memplan_torch import command, costs
from memplan_torch.graph.step_graph import export_step

import decoder

def _peak_rss_since_reset():
    """Resets the process's peak RSS (Linux: /proc/self/clear_refs) and returns a function that reads how far it
    rose since, in bytes."""
    def hwm():
        return int(re.search(r"VmHWM:\s+(\d+)", open("/proc/self/status").read()).group(1)) * 1024
    with open("/proc/self/clear_refs", "w") as f:
        f.write("5")
    start = hwm()
    return lambda: hwm() - start


def _shape(g):
    """What two exports of one model must share: every tensor (name, bytes, persistent) and op (name, phase,
    inputs, outputs, cost)."""
    return ([(t["name"], t["bytes"], bool(t.get("persistent"))) for t in g["tensors"]],
            [(o["name"], o["phase"], o["inputs"], o["outputs"], round(o["cost"], 9)) for o in g["ops"]],
            g["outputs"], g["memplan_torch"]["parameters"])


def test_a_meta_model_exports_without_allocating_its_parameters():
    # 0.66 GB of fp32 parameters (two layers, so the trace stays small); nothing of them may be allocated.
    c = decoder.Config(vocab=65536, dim=1024, layers=2, heads=8, kv_heads=4, ffn=4096)
    model = decoder.build(c, "meta")
    param_bytes = sum(p.numel() * p.element_size() for p in model.parameters())
    assert param_bytes > 600e6
    ids = torch.empty(1, 64, dtype=torch.long, device="meta")
    rise = _peak_rss_since_reset()
    g, joint, _ = export_step(model, (ids,), targets=(ids,), optimizer="adamw", cost="roofline:h100")
    assert rise() < param_bytes / 4, f"peak RSS rose by {rise() / 1e6:.0f} MB for {param_bytes / 1e6:.0f} MB of weights"
    # The model keeps its meta tensors; the trace saw fake ones, with no data.
    assert all(p.device.type == "meta" for p in model.parameters()) and model.inv_freq.device.type == "meta"
    assert all(type(p).__name__ == "FakeTensor" for p in joint.param_tensors.values())
    tensors = {t["name"]: t for t in g["tensors"]}
    assert tensors["embed.weight"]["bytes"] == 65536 * 1024 * 4 and tensors["embed.weight"]["persistent"]
    assert tensors["embed.weight.exp_avg"]["bytes"] == 65536 * 1024 * 4  # AdamW's moments, in the graph only
    assert g["memplan_torch"]["parameters"] == sum(p.numel() for p in model.parameters())
    assert g["memplan_torch"]["device"] == "meta" and g["memplan_torch"]["workspace"] == "none"
    assert g["cost_model"] == "roofline:h100" and not any(op.get("workspace", 0) and op["phase"] != "update"
                                                          for op in g["ops"])


def test_the_meta_graph_is_the_graph_of_the_model_on_real_tensors():
    c, dtype = decoder.Config(), torch.bfloat16
    meta = decoder.build(c, "meta", dtype)
    ids = torch.empty(2, 32, dtype=torch.long, device="meta")
    g = mt.export(meta, (ids,), targets=(ids,), optimizer="adamw", cost="roofline:h100")
    torch.manual_seed(0)
    real = decoder.build(c, None, dtype)
    x = torch.randint(0, c.vocab, (2, 32))
    r = mt.export(real, (x,), targets=(x,), optimizer="adamw", cost="roofline:h100", workspace="none")
    assert _shape(g) == _shape(r)
    # bf16 matrix products run at the H100's bf16 rate (and no faster).
    mms = [op for op in g["ops"] if op.get("flops", 0) > 0]
    assert mms and all(op["cost"] >= op["flops"] / costs.matmul_rate("h100", costs.HALF) * 1e6 * (1 - 1e-9)
                       for op in mms)


def test_a_plain_mlp_on_meta_plans_at_half_the_memory():
    with torch.device("meta"):
        layers = []
        for _ in range(8):
            layers += [nn.Linear(64, 64), nn.GELU()]
        model = nn.Sequential(*layers, nn.Linear(64, 10))
    x = torch.empty(8192, 64, device="meta")  # activations far above the weights: half the memory is feasible
    y = torch.empty(8192, dtype=torch.long, device="meta")
    g = mt.export(model, (x,), targets=(y,), optimizer="adamw", cost="fused:h100")
    assert g["memplan_torch"]["parameters"] == 8 * (64 * 64 + 64) + 64 * 10 + 10
    assert sum(op["phase"] == "update" for op in g["ops"]) == 18
    first = next(op for op in g["ops"] if op.get("flops", 0) > 0)
    assert first["flops"] == 2 * 8192 * 64 * 64 and first["cost"] >= first["flops"] / 494e12 * 1e6  # fp32: TF32
    plan, _ = command.plan(g, "50%", time_limit=5)
    ok, report = command.check(g, plan)
    assert ok, report


def test_bad_input_is_named():
    c = decoder.Config(layers=1)
    meta = decoder.build(c, "meta")
    real_ids = torch.zeros(2, 16, dtype=torch.long)
    meta_ids = torch.empty(2, 16, dtype=torch.long, device="meta")
    with pytest.raises(mt.ExportError, match=r"parameter 'embed.weight' is on the meta device but input 0 is on cpu"):
        mt.export(meta, (real_ids,), targets=(real_ids,))
    with pytest.raises(mt.ExportError, match=r"input 0 is on the meta device but parameter 'embed.weight' is on cpu"):
        mt.export(decoder.build(c), (meta_ids,), targets=(meta_ids,))
    with pytest.raises(ValueError, match=r"unknown device 'h300' \(known: v100, h100, h200\)"):
        mt.export(meta, (meta_ids,), targets=(meta_ids,), cost="roofline:h300")
    with pytest.raises(mt.ExportError, match=r"measured costs time kernels.*roofline:h100"):
        mt.export(meta, (meta_ids,), targets=(meta_ids,), cost="measured")
    with pytest.raises(mt.ExportError, match=r"workspace 'cpu'.*meta device runs none"):
        mt.export(meta, (meta_ids,), targets=(meta_ids,), workspace="cpu")
    with pytest.raises(mt.ExportError, match=r"Decoder is on the meta device: it has no weights to train"):
        mt.compile(meta, 0.5, (meta_ids,), targets=(meta_ids,))
    assert all(p.device.type == "meta" for p in meta.parameters())  # a failed export leaves the model as it was


def test_command_line_exports_a_meta_model(tmp_path, capsys):
    from memplan_torch.__main__ import main
    cfg = tmp_path / "decoder.json"
    cfg.write_text(json.dumps({"layers": 1, "dim": 64, "heads": 4, "kv_heads": 2, "ffn": 128, "vocab": 256}))
    out = tmp_path / "g.json"
    base = ["export", "--device", "meta", "--seq", "32", "--batch", "2", "--dtype", "bf16", "--optimizer", "adamw",
            "--cost", "roofline:h100", "-o", str(out)]
    assert main(base + ["--model", "decoder:make", "--config", str(cfg)]) == 0, capsys.readouterr().err
    g = json.loads(out.read_text())
    assert g["cost_model"] == "roofline:h100" and g["memplan_torch"]["device"] == "meta"
    assert {t["name"]: t["bytes"] for t in g["tensors"]}["embed.weight"] == 256 * 64 * 2  # bf16
    assert torch.get_default_dtype() == torch.float32  # --dtype is the default only while the model is built
    out.unlink()
    capsys.readouterr()
    assert main(base + ["--model", "transformers:LlamaForCausalLM"]) == 2
    assert "give --config" in capsys.readouterr().err and not out.exists()


def test_a_hugging_face_llama_on_meta_is_its_graph_on_real_tensors():
    pytest.importorskip("transformers")
    from memplan_torch.__main__ import load_model
    cfg = {"model_type": "llama", "hidden_size": 64, "intermediate_size": 128, "num_hidden_layers": 1,
           "num_attention_heads": 4, "num_key_value_heads": 2, "vocab_size": 256, "tie_word_embeddings": False}
    meta = load_model("transformers:LlamaForCausalLM", cfg, "meta", torch.bfloat16)
    ids = torch.empty(1, 32, dtype=torch.long, device="meta")
    g = mt.export(meta, (ids,), "model", targets=(ids,), optimizer="adamw", cost="roofline:h100")
    torch.manual_seed(0)
    real = load_model("transformers:LlamaForCausalLM", cfg, None, torch.bfloat16)
    x = torch.randint(0, 256, (1, 32))
    r = mt.export(real, (x,), "model", targets=(x,), optimizer="adamw", cost="roofline:h100", workspace="none")
    assert _shape(g) == _shape(r)
