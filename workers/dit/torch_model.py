"""The class-conditional DiT in PyTorch (Peebles & Xie): patchify, adaLN-Zero blocks, unpatchify; or
pooled-text-conditional (config text_width > 0). Its state_dict is the canonical layout
(workers/dit/layout.py); workers/dit/flax_model.py is its twin."""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F
from torch import nn

from ddm.workers.dit.config import DiTConfig
from ddm.workers.dit.layout import pos_embed_2d

LN_EPS = 1e-6  # the paper's; set explicitly in both twins


def timestep_embedding(t: torch.Tensor, dim: int) -> torch.Tensor:
    """Sinusoidal features of t in [0, 1] (scaled by 1000, as the UNet's): [B] -> [B, dim], cos then sin
    (the paper's TimestepEmbedder order)."""
    half = dim // 2
    freqs = torch.exp(-math.log(10000.0) * torch.arange(half, dtype=torch.float32, device=t.device) / half)
    args = (t.float() * 1000.0)[:, None] * freqs[None, :]
    return torch.cat([torch.cos(args), torch.sin(args)], dim=1)


def layer_norm(x: torch.Tensor) -> torch.Tensor:
    """LayerNorm over the last axis without scale or bias (adaLN brings them)."""
    return F.layer_norm(x, x.shape[-1:], eps=LN_EPS)


def modulate(x: torch.Tensor, shift: torch.Tensor, scale: torch.Tensor) -> torch.Tensor:
    """x [B, N, h] * (1 + scale [B, h]) + shift [B, h], per sample."""
    return x * (1.0 + scale[:, None, :]) + shift[:, None, :]


class Attention(nn.Module):
    """Multi-head self-attention: qkv, softmax(q k^T / sqrt(head_dim)) v, proj."""

    def __init__(self, hidden: int, heads: int):
        super().__init__()
        self.heads = heads
        self.qkv = nn.Linear(hidden, 3 * hidden)
        self.proj = nn.Linear(hidden, hidden)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        B, N, h = x.shape
        qkv = self.qkv(x).reshape(B, N, 3, self.heads, h // self.heads).permute(2, 0, 3, 1, 4)
        q, k, v = qkv[0], qkv[1], qkv[2]  # [B, heads, N, head_dim]
        out = F.scaled_dot_product_attention(q, k, v)  # [B, heads, N, head_dim]
        return self.proj(out.transpose(1, 2).reshape(B, N, h))  # [B, N, h]


class Mlp(nn.Module):
    def __init__(self, hidden: int, mlp_hidden: int):
        super().__init__()
        self.fc1 = nn.Linear(hidden, mlp_hidden)
        self.fc2 = nn.Linear(mlp_hidden, hidden)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.fc2(F.gelu(self.fc1(x), approximate="tanh"))


class DiTBlock(nn.Module):
    """Self-attention and an MLP, each behind a LayerNorm modulated by the conditioning (shift, scale)
    and gated; the modulation Linear starts at zero, so the block starts as the identity (adaLN-Zero)."""

    def __init__(self, hidden: int, heads: int, mlp_hidden: int):
        super().__init__()
        self.attn = Attention(hidden, heads)
        self.mlp = Mlp(hidden, mlp_hidden)
        self.ada = nn.Linear(hidden, 6 * hidden)

    def forward(self, x: torch.Tensor, c: torch.Tensor) -> torch.Tensor:
        shift_a, scale_a, gate_a, shift_m, scale_m, gate_m = self.ada(F.silu(c)).chunk(6, dim=1)  # [B, h]
        x = x + gate_a[:, None, :] * self.attn(modulate(layer_norm(x), shift_a, scale_a))
        return x + gate_m[:, None, :] * self.mlp(modulate(layer_norm(x), shift_m, scale_m))  # [B, N, h]


class DiT(nn.Module):
    """Class-conditional DiT: x [B,C,H,W], t [B] in [0,1], y [B] int (num_classes = null) -> v [B,C,H,W].
    A text DiT (cfg.text_width > 0) reads y as the pooled prompt embedding, float [B, text_width].

    Tokens: (H/p)(W/p) patches of p x p pixels plus a fixed 2D sin-cos position table; conditioning
    c = MLP(sinusoid(1000 t)) + embed(y), read by every block's adaLN-Zero and by the final layer.
    """

    def __init__(self, cfg: DiTConfig):
        super().__init__()
        self.cfg = cfg
        h, p, C = cfg.hidden_size, cfg.patch_size, cfg.in_channels
        self.patch_embed = nn.Conv2d(C, h, p, stride=p)
        self.t_mlp1 = nn.Linear(cfg.freq_dim, h)
        self.t_mlp2 = nn.Linear(h, h)
        if cfg.text_width:  # the pooled prompt embedding in the class embedding's place
            self.text_embed = nn.Linear(cfg.text_width, h)
        else:
            self.y_embed = nn.Embedding(cfg.num_classes + 1, h)  # +1: the null class
        for i in range(cfg.depth):
            setattr(self, f"block{i}", DiTBlock(h, cfg.num_heads, cfg.mlp_hidden))
        self.final_ada = nn.Linear(h, 2 * h)
        self.final_linear = nn.Linear(h, p * p * C)
        # not a parameter and not saved: both twins compute the same table from the config
        self.register_buffer("pos_embed", torch.from_numpy(pos_embed_2d(h, cfg.grid)), persistent=False)
        self._init_weights()

    def _init_weights(self) -> None:
        """The paper's: Xavier-uniform Linear and patch weights, zero biases, N(0, 0.02) class and time
        embeddings, and zero for every adaLN modulation and the final Linear (the model starts at v = 0)."""
        for module in self.modules():
            if isinstance(module, nn.Linear):
                nn.init.xavier_uniform_(module.weight)
                nn.init.zeros_(module.bias)
        w = self.patch_embed.weight
        nn.init.xavier_uniform_(w.view(w.shape[0], -1))
        nn.init.zeros_(self.patch_embed.bias)
        if not self.cfg.text_width:  # a text DiT's text_embed is a Linear: Xavier, as the others
            nn.init.normal_(self.y_embed.weight, std=0.02)
        nn.init.normal_(self.t_mlp1.weight, std=0.02)
        nn.init.normal_(self.t_mlp2.weight, std=0.02)
        zero = [getattr(self, f"block{i}").ada for i in range(self.cfg.depth)]
        for module in (*zero, self.final_ada, self.final_linear):
            nn.init.zeros_(module.weight)
            nn.init.zeros_(module.bias)

    def forward(self, x: torch.Tensor, t: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
        cfg = self.cfg
        B, C, H, W = x.shape
        p, g = cfg.patch_size, cfg.grid
        tokens = self.patch_embed(x).flatten(2).transpose(1, 2) + self.pos_embed  # [B, N, h], N = g*g
        temb = self.t_mlp2(F.silu(self.t_mlp1(timestep_embedding(t, cfg.freq_dim))))  # [B, h]
        c = temb + (self.text_embed(y) if cfg.text_width else self.y_embed(y))  # [B, h]
        for i in range(cfg.depth):
            tokens = getattr(self, f"block{i}")(tokens, c)  # [B, N, h]
        shift, scale = self.final_ada(F.silu(c)).chunk(2, dim=1)  # [B, h]
        out = self.final_linear(modulate(layer_norm(tokens), shift, scale))  # [B, N, p*p*C]
        out = out.reshape(B, g, g, p, p, C)  # token (row, col), pixel (p, q), channel
        return torch.einsum("nhwpqc->nchpwq", out).reshape(B, C, H, W)  # [B, C, H, W]
