"""GPT-2 small (124M parameters), written out for the tests and the benchmarks.

The architecture of Radford et al. (2019) as nanoGPT spells it: 12 blocks of
pre-norm attention (12 heads, explicit causal soft-max attention, so that every
product and the mask are ATen ops of the joint graph) and a 4x GELU MLP, learned
positions, the output head tied to the token embedding, dropout 0.1 (random ops
that a plan may only recompute by replaying their seed).
"""
from __future__ import annotations

import math

import torch
import torch.nn as nn
import torch.nn.functional as F


class Attention(nn.Module):
    def __init__(self, d: int, heads: int, ctx: int, dropout: float):
        super().__init__()
        self.heads = heads
        self.qkv = nn.Linear(d, 3 * d)
        self.proj = nn.Linear(d, d)
        self.attn_drop = nn.Dropout(dropout)
        self.resid_drop = nn.Dropout(dropout)
        self.register_buffer("mask", torch.tril(torch.ones(ctx, ctx, dtype=torch.bool)), persistent=False)

    def forward(self, x):
        b, t, d = x.shape
        q, k, v = self.qkv(x).split(d, dim=2)
        q, k, v = (z.view(b, t, self.heads, d // self.heads).transpose(1, 2) for z in (q, k, v))
        att = (q @ k.transpose(-2, -1)) / math.sqrt(d // self.heads)
        att = att.masked_fill(~self.mask[:t, :t], float("-inf"))
        att = self.attn_drop(F.softmax(att, dim=-1))
        y = (att @ v).transpose(1, 2).contiguous().view(b, t, d)
        return self.resid_drop(self.proj(y))


class Block(nn.Module):
    def __init__(self, d: int, heads: int, ctx: int, dropout: float):
        super().__init__()
        self.ln1 = nn.LayerNorm(d)
        self.attn = Attention(d, heads, ctx, dropout)
        self.ln2 = nn.LayerNorm(d)
        self.fc = nn.Linear(d, 4 * d)
        self.out = nn.Linear(4 * d, d)
        self.drop = nn.Dropout(dropout)

    def forward(self, x):
        x = x + self.attn(self.ln1(x))
        return x + self.drop(self.out(F.gelu(self.fc(self.ln2(x)), approximate="tanh")))


class GPT2(nn.Module):
    def __init__(self, vocab: int = 50257, ctx: int = 1024, d: int = 768, layers: int = 12, heads: int = 12,
                 dropout: float = 0.1):
        super().__init__()
        self.vocab = vocab
        self.wte = nn.Embedding(vocab, d)
        self.wpe = nn.Embedding(ctx, d)
        self.drop = nn.Dropout(dropout)
        self.blocks = nn.ModuleList(Block(d, heads, ctx, dropout) for _ in range(layers))
        self.ln_f = nn.LayerNorm(d)
        self.head = nn.Linear(d, vocab, bias=False)
        self.head.weight = self.wte.weight  # tied
        self.apply(self._init)

    @staticmethod
    def _init(m):
        if isinstance(m, (nn.Linear, nn.Embedding)):
            nn.init.normal_(m.weight, std=0.02)
        if isinstance(m, nn.Linear) and m.bias is not None:
            nn.init.zeros_(m.bias)

    def forward(self, idx):
        t = idx.shape[1]
        pos = torch.arange(t, device=idx.device)
        x = self.drop(self.wte(idx) + self.wpe(pos))
        for b in self.blocks:
            x = b(x)
        return self.head(self.ln_f(x))


def gpt2_small(**kw) -> GPT2:
    return GPT2(**kw)


def lm_loss(logits, targets):
    return F.cross_entropy(logits.reshape(-1, logits.shape[-1]), targets.reshape(-1))


def example(batch: int = 2, seq: int = 512, vocab: int = 50257, seed: int = 0):
    g = torch.Generator().manual_seed(seed)
    idx = torch.randint(0, vocab, (batch, seq), generator=g)
    return idx, torch.roll(idx, -1, dims=1)
