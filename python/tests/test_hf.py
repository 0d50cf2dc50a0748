"""Hugging Face transformer families export, plan and train with the plan: the loss and every gradient are
the unplanned eager step's, step after step, and the measured peak is the predicted one. Tiny configurations
(2 layers, hidden 64, vocabulary 1000, batch 2 x 32 tokens, dropout 0) for a 2-core CI machine."""
import copy

import pytest
import torch
import torch.nn as nn

transformers = pytest.importorskip("transformers")

import memplan_torch as mt  # noqa: E402
from memplan_torch.graph.step_graph import export_step  # noqa: E402
from memplan_torch.probe import peak_of, storage_bytes  # noqa: E402
from memplan_torch.step.joint import autocast_as, step_loss  # noqa: E402

V, H, L, B, S = 1000, 64, 2, 2, 32


def _ids(seed=0, vocab=V):
    return torch.randint(0, vocab, (B, S), generator=torch.Generator().manual_seed(seed))


def lm_loss(out, t):  # a loss of the caller's on a Hugging Face output
    return nn.functional.cross_entropy(out.logits.reshape(-1, out.logits.shape[-1]), t.reshape(-1))


def gpt2():
    m = transformers.GPT2LMHeadModel(transformers.GPT2Config(
        n_layer=L, n_embd=H, n_head=4, vocab_size=V, n_positions=S, resid_pdrop=0.0, embd_pdrop=0.0,
        attn_pdrop=0.0))
    return m, (_ids(),), (_ids(1),), lm_loss


def llama(**kw):
    # Grouped-query attention (4 heads, 2 key-value heads), rotary embeddings, untied head; its own loss.
    m = transformers.LlamaForCausalLM(transformers.LlamaConfig(
        num_hidden_layers=L, hidden_size=H, intermediate_size=2 * H, num_attention_heads=4, num_key_value_heads=2,
        vocab_size=V, max_position_embeddings=S, **kw))
    return m, (_ids(),), (_ids(),), "model"


def bert():
    # Masked LM: tied decoder (its bias under two names, one unread), padding_idx 0, a padding mask.
    m = transformers.BertForMaskedLM(transformers.BertConfig(
        num_hidden_layers=L, hidden_size=H, intermediate_size=2 * H, num_attention_heads=4, vocab_size=V,
        max_position_embeddings=S, hidden_dropout_prob=0.0, attention_probs_dropout_prob=0.0))
    ids = _ids()
    ids[1, -5:] = 0  # padding
    mask = (ids != 0).long()
    labels = torch.full_like(ids, -100)
    labels[:, ::4] = _ids(1)[:, ::4]
    return m, (ids, mask), (labels,), "model"


def vit():
    m = transformers.ViTForImageClassification(transformers.ViTConfig(
        hidden_size=H, num_hidden_layers=L, num_attention_heads=4, intermediate_size=2 * H, image_size=32,
        patch_size=8, num_labels=10, hidden_dropout_prob=0.0, attention_probs_dropout_prob=0.0))
    g = torch.Generator().manual_seed(0)
    return m, (torch.randn(B, 3, 32, 32, generator=g),), (torch.randint(0, 10, (B,), generator=g),), "model"


def _case(factory, **kw):
    torch.manual_seed(0)
    model, inputs, targets, loss_fn = factory(**kw)
    return model.train(), inputs, targets, loss_fn


def _rel(a, b):
    return ((a - b).abs().max() / b.abs().max().clamp_min(1e-30)).item()


def _grads_equal(model, ref, tol):
    n = 0
    for (name, p), (_, q) in zip(model.named_parameters(), ref.named_parameters()):
        if q.grad is None:
            assert p.grad is None, name
            continue
        assert p.grad is not None and _rel(p.grad, q.grad) <= tol, (name, _rel(p.grad, q.grad))
        n += 1
    assert n > 0


def _train_and_compare(model, cm, inputs, targets, loss_fn, steps=3, tol=1e-4, ctx=None):
    """`steps` SGD steps of the planned module and of eager PyTorch from the same weights: equal losses and
    gradients at every step."""
    import contextlib
    ctx = ctx or contextlib.nullcontext
    ref = copy.deepcopy(model)
    opt = torch.optim.SGD([p for p in model.parameters() if p.requires_grad], lr=0.1)
    ref_opt = torch.optim.SGD([p for p in ref.parameters() if p.requires_grad], lr=0.1)
    for _ in range(steps):
        opt.zero_grad(set_to_none=True)
        ref_opt.zero_grad(set_to_none=True)
        with ctx():
            loss = cm(*inputs, *targets)
            want = step_loss(ref, loss_fn, inputs, targets)
        loss.backward()
        want.backward()
        assert _rel(loss.detach().float(), want.detach().float()) <= tol
        _grads_equal(model, ref, tol)
        opt.step()
        ref_opt.step()


def _unplanned_joint_grads(cm, args):
    """The joint graph's gradients, run as traced (no plan), in the order of ``cm.joint.grads``."""
    with torch.no_grad(), autocast_as(()):
        outs = torch.fx.Interpreter(cm.joint.gm).run(*cm.joint.placeholder_values(args))
    by_node = dict(zip((n.name for n in cm.joint.gm.graph.find_nodes(op="output")[0].args[0]), outs))
    return [by_node[node] for node in cm.joint.grads]


def _peak(model, cm, inputs, targets):
    for p in model.parameters():
        p.grad = None
    resident = storage_bytes(list(model.parameters()) + list(model.buffers()) + list(inputs) + list(targets)
                             + list(cm.interp.constants.values()))
    peak, _, _ = peak_of(lambda: cm(*inputs, *targets).backward(), resident)
    return peak


@pytest.mark.parametrize("factory", [gpt2, llama, bert, vit], ids=lambda f: f.__name__)
def test_family_exports_plans_and_trains_as_eager(factory):
    model, inputs, targets, loss_fn = _case(factory)
    before = [(n, p.requires_grad) for n, p in model.named_parameters()]
    # PyTorch's activation budget: half of what store-all saves for the backward (at these sizes the weights
    # and gradients alone are most of the peak, so a budget on the peak would leave nothing to plan).
    cm = mt.compile(model, 0.5, inputs, targets=targets, loss_fn=loss_fn, budget_on="saved", time_limit=1)
    assert [(n, p.requires_grad) for n, p in model.named_parameters()] == before  # given back as they were
    ok, report = mt.command.check(cm.graph, cm.plan, cm.budget_on)
    assert ok, report
    assert cm.schedule.recomputed and cm.schedule.saved_bytes <= 0.5 * cm.report["store_all_kept"]
    # One update per distinct parameter: a tied weight (GPT-2's head, BERT's decoder) is one tensor.
    updates = [op for op in cm.graph["ops"] if op["phase"] == "update"]
    assert len(updates) == len({p.data_ptr() for p in model.parameters()})
    _train_and_compare(model, cm, inputs, targets, loss_fn, steps=2)
    peak = _peak(model, cm, inputs, targets)
    assert abs(peak / cm.schedule.live_peak - 1) <= 0.05, (peak, cm.schedule.live_peak)


def test_parameters_no_gradient_reaches_are_read_but_not_updated():
    # BERT's pooler under a loss on the hidden states: no gradient reaches it (aot_autograd alone refuses
    # such a step). It stays a persistent tensor of the graph, with no gradient and no update.
    torch.manual_seed(0)
    model = transformers.BertModel(transformers.BertConfig(
        num_hidden_layers=1, hidden_size=H, intermediate_size=2 * H, num_attention_heads=4, vocab_size=V,
        max_position_embeddings=S, hidden_dropout_prob=0.0, attention_probs_dropout_prob=0.0))
    g, joint, _ = export_step(model, (_ids(),), lambda out: out.last_hidden_state.pow(2).mean(),
                                      workspace="none")
    assert joint.no_grad == {"pooler.dense.weight": "unused", "pooler.dense.bias": "unused"}
    assert all(p.requires_grad for p in model.parameters())
    tensors = {t["name"]: t for t in g["tensors"]}
    assert tensors["pooler.dense.weight"]["persistent"] and tensors["pooler.dense.weight"]["bytes"] == H * H * 4
    updates = {op["name"] for op in g["ops"] if op["phase"] == "update"}
    assert "update.pooler.dense.weight" not in updates and "update.encoder.layer.0.attention.self.query.weight" in updates
    assert len(updates) == sum(1 for _ in model.parameters()) - 2


def test_frozen_parameters_train_as_eager_lora_style():
    # Only the attention's query and value projections train (the base weights frozen, as under LoRA): the plan
    # has gradients and updates for those alone, and the step is eager's.
    model, inputs, targets, loss_fn = _case(llama)
    for n, p in model.named_parameters():
        p.requires_grad_(n.endswith(("q_proj.weight", "v_proj.weight")))
    cm = mt.compile(model, 0.5, inputs, targets=targets, loss_fn=loss_fn, budget_on="saved", time_limit=1,
                     workspace="none")
    trained = {n for n, p in model.named_parameters() if p.requires_grad}
    assert len(trained) == 2 * L
    assert {op["name"] for op in cm.graph["ops"] if op["phase"] == "update"} == {f"update.{n}" for n in trained}
    assert set(cm.joint.grads.values()) == trained
    assert set(cm.joint.no_grad) == {n for n, _ in model.named_parameters()} - trained
    _train_and_compare(model, cm, inputs, targets, loss_fn, steps=2)
    model.model.embed_tokens.weight.requires_grad_(True)
    with pytest.raises(ValueError, match=r"^parameter 'model.embed_tokens.weight': requires_grad is True"):
        cm(*inputs, *targets)


def test_pure_bf16_training():
    model, inputs, targets, loss_fn = _case(gpt2)
    model.to(torch.bfloat16)
    cm = mt.compile(model, 0.5, inputs, targets=targets, loss_fn=loss_fn, budget_on="saved", time_limit=1,
                     workspace="none")
    tensors = {t["name"]: t for t in cm.graph["tensors"]}
    assert tensors["transformer.wte.weight"]["bytes"] == V * H * 2
    assert cm.schedule.recomputed
    _train_and_compare(model, cm, inputs, targets, loss_fn, steps=2, tol=1e-2)


def test_autocast_casts_are_ops_of_their_own():
    # CPU autocast to bf16 with fp32 weights: the casts (weights to bf16, the loss's logits back to fp32) are
    # ops with tensors of their own, and the planned step is eager's under the same autocast.
    model, inputs, targets, loss_fn = _case(llama)
    autocast = lambda: torch.autocast("cpu", dtype=torch.bfloat16)  # noqa: E731
    with autocast():
        cm = mt.compile(model, 0.5, inputs, targets=targets, loss_fn=loss_fn, budget_on="saved", time_limit=1,
                         workspace="none")
    sizes = {t["name"]: t["bytes"] for t in cm.graph["tensors"]}
    q = "model.layers.0.self_attn.q_proj.weight"
    casts = [op for op in cm.graph["ops"] if op.get("aten") == "aten._to_copy.default" and q in op["inputs"]]
    assert casts and sizes[casts[0]["outputs"][0]] == sizes[q] // 2  # a bf16 copy of the fp32 weight
    assert cm.joint.autocast == (("cpu", torch.bfloat16),)
    # The planned step is the traced graph's to the bit: recomputed casts and ops are the same ops on the same
    # values. The graph is eager autocast's to bf16 rounding (0.7 % here: aot_autograd's trace of the step, the
    # plan aside), so against eager the tolerance is bf16's.
    want = dict(zip(cm.joint.grads.values(), _unplanned_joint_grads(cm, inputs + targets)))
    with autocast():
        loss = cm(*inputs, *targets)
    loss.backward()
    for fqn, g in want.items():
        assert _rel(cm.joint.param_tensors[fqn].grad, g) <= 1e-6, fqn
    model.zero_grad(set_to_none=True)
    _train_and_compare(model, cm, inputs, targets, loss_fn, steps=2, tol=3e-2, ctx=autocast)
    with pytest.raises(ValueError, match="traced under autocast cpu bfloat16 and is called under no autocast"):
        cm(*inputs, *targets)


def test_adamw_has_adams_memory():
    from memplan_torch.graph.lower import build_graph
    from memplan_torch.step.joint import OPTIMIZERS
    from memplan_torch.step.trace import trace
    assert "adamw" in OPTIMIZERS
    torch.manual_seed(0)
    model = nn.Sequential(nn.Embedding(V, H), nn.Linear(H, V))
    joint = trace(model, (_ids(),), None, (_ids(1),))
    adam, _ = build_graph(joint, "adam")
    adamw, _ = build_graph(joint, "adamw")
    assert adamw["tensors"] == adam["tensors"]
    assert [(o["inputs"], o.get("workspace")) for o in adamw["ops"]] == [(o["inputs"], o.get("workspace"))
                                                                         for o in adam["ops"]]
    sgd, _ = build_graph(joint, "sgd")
    moments = sum(t["bytes"] for t in adam["tensors"]) - sum(t["bytes"] for t in sgd["tensors"])
    assert moments == 2 * sum(p.numel() * 4 for p in model.parameters())


class _Gate(nn.Module):
    def forward(self, x):
        if x.sum() > 0:  # data-dependent control flow
            return x * 2
        return x


def branchy():
    return nn.Sequential(nn.Linear(8, 8), _Gate())


def test_a_step_the_tracer_cannot_take_fails_with_one_message(tmp_path, capsys):
    with pytest.raises(mt.ExportError) as e:
        mt.export(branchy(), (torch.randn(4, 8),), workspace="none")
    msg = str(e.value)
    assert "\n" not in msg and e.value.__cause__ is None and e.value.__suppress_context__
    assert "module '1' (_Gate, test_hf.py:" in msg and "aten._local_scalar_dense" in msg and "torch.where" in msg
    # The command line says it in one line and writes nothing.
    from memplan_torch.__main__ import main
    out = tmp_path / "g.json"
    assert main(["export", "--model", "test_hf:branchy", "--batch", "2", "--image", "8", "-o", str(out)]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "_Gate" in err and not out.exists()
