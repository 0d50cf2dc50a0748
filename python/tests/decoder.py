"""A Llama-style decoder in plain PyTorch (nn.Embedding, nn.Linear, F.scaled_dot_product_attention):
RMSNorm, rotary position embeddings, grouped-query attention, a SwiGLU feed-forward and an untied output
head. Small configurations for the tests; `llama3_8b()` the shapes of Llama-3-8B (for meta-device exports:
built anywhere else it allocates 16 GB of bf16 weights)."""
from __future__ import annotations

import contextlib
import dataclasses

import torch
import torch.nn as nn
import torch.nn.functional as F


@dataclasses.dataclass
class Config:
    vocab: int = 512
    dim: int = 64
    layers: int = 2
    heads: int = 4
    kv_heads: int = 2
    ffn: int = 160
    rope_theta: float = 500000.0
    eps: float = 1e-5


class RMSNorm(nn.Module):
    def __init__(self, dim, eps):
        super().__init__()
        self.eps = eps
        self.weight = nn.Parameter(torch.ones(dim))

    def forward(self, x):
        xf = x.float()
        return (xf * torch.rsqrt(xf.pow(2).mean(-1, keepdim=True) + self.eps)).to(x.dtype) * self.weight


def _rotate(x, cos, sin):
    x1, x2 = x.chunk(2, dim=-1)
    return x * cos + torch.cat((-x2, x1), dim=-1) * sin


class Attention(nn.Module):
    def __init__(self, c: Config):
        super().__init__()
        self.heads, self.kv_heads, self.hd = c.heads, c.kv_heads, c.dim // c.heads
        self.q = nn.Linear(c.dim, c.heads * self.hd, bias=False)
        self.k = nn.Linear(c.dim, c.kv_heads * self.hd, bias=False)
        self.v = nn.Linear(c.dim, c.kv_heads * self.hd, bias=False)
        self.o = nn.Linear(c.heads * self.hd, c.dim, bias=False)

    def forward(self, x, cos, sin):
        b, s, _ = x.shape
        q = self.q(x).view(b, s, self.heads, self.hd).transpose(1, 2)      # (B, H, S, D)
        k = self.k(x).view(b, s, self.kv_heads, self.hd).transpose(1, 2)   # (B, KV, S, D)
        v = self.v(x).view(b, s, self.kv_heads, self.hd).transpose(1, 2)
        q, k = _rotate(q, cos, sin), _rotate(k, cos, sin)
        rep = self.heads // self.kv_heads
        k, v = k.repeat_interleave(rep, dim=1), v.repeat_interleave(rep, dim=1)
        y = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        return self.o(y.transpose(1, 2).reshape(b, s, -1))


class Block(nn.Module):
    def __init__(self, c: Config):
        super().__init__()
        self.attn_norm, self.attn = RMSNorm(c.dim, c.eps), Attention(c)
        self.ffn_norm = RMSNorm(c.dim, c.eps)
        self.gate = nn.Linear(c.dim, c.ffn, bias=False)
        self.up = nn.Linear(c.dim, c.ffn, bias=False)
        self.down = nn.Linear(c.ffn, c.dim, bias=False)

    def forward(self, x, cos, sin):
        x = x + self.attn(self.attn_norm(x), cos, sin)
        h = self.ffn_norm(x)
        return x + self.down(F.silu(self.gate(h)) * self.up(h))


class Decoder(nn.Module):
    def __init__(self, c: Config = Config()):
        super().__init__()
        self.config = c
        self.embed = nn.Embedding(c.vocab, c.dim)
        self.blocks = nn.ModuleList(Block(c) for _ in range(c.layers))
        self.norm = RMSNorm(c.dim, c.eps)
        self.head = nn.Linear(c.dim, c.vocab, bias=False)
        hd = c.dim // c.heads
        # Not saved with the weights (persistent=False), as in Llama; always fp32 (a module's .to(dtype) would
        # make it bf16, so the model is built in its dtype rather than converted).
        self.register_buffer("inv_freq", 1.0 / c.rope_theta ** (torch.arange(0, hd, 2, dtype=torch.float32) / hd),
                             persistent=False)

    def forward(self, ids):
        s = ids.shape[1]
        pos = torch.arange(s, device=ids.device, dtype=torch.float32)
        freqs = torch.outer(pos, self.inv_freq)
        emb = torch.cat((freqs, freqs), dim=-1)
        x = self.embed(ids)
        cos, sin = emb.cos().to(x.dtype), emb.sin().to(x.dtype)
        for b in self.blocks:
            x = b(x, cos, sin)
        return self.head(self.norm(x))


def llama3_8b(layers: int = 32) -> Config:
    """Llama-3-8B's shapes: 32 layers, hidden 4096, 32 heads, 8 KV heads, FFN 14336, vocabulary 128256."""
    return Config(vocab=128256, dim=4096, layers=layers, heads=32, kv_heads=8, ffn=14336)


def build(c: Config, device=None, dtype=None) -> Decoder:
    """The decoder built on `device` (e.g. "meta") with floating parameters in `dtype` (the RoPE buffer
    stays fp32)."""
    old = torch.get_default_dtype()
    try:
        if dtype is not None:
            torch.set_default_dtype(dtype)
        with torch.device(device) if device is not None else contextlib.nullcontext():
            return Decoder(c)
    finally:
        torch.set_default_dtype(old)



def make(**fields) -> Decoder:
    """A decoder of Config(**fields): the factory of ``--model decoder:make --config FIELDS.json``."""
    return Decoder(Config(**fields))
