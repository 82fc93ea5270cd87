"""The DiT's canonical layout, framework-free: every parameter's name and shape (the PyTorch twin's
state_dict; the Flax twin's modules carry the same names, so ddm.workers.layout maps them), and the
fixed 2D sin-cos position table, which is not a parameter (neither twin stores it).

    patch_embed          Conv2d  [hidden, C, p, p]       the patchify convolution (stride p)
    t_mlp1, t_mlp2       Linear  [hidden, freq], [hidden, hidden]   timestep MLP (SiLU between)
    y_embed              Embedding [num_classes + 1, hidden]        row num_classes: the null class
    text_embed           Linear  [hidden, text_width]    instead of y_embed when text_width > 0: the
                                                         pooled prompt embedding into the conditioning
    block<i>.attn.qkv    Linear  [3 hidden, hidden]      q, k, v of all heads: (3, heads, head_dim)
    block<i>.attn.proj   Linear  [hidden, hidden]
    block<i>.mlp.fc1     Linear  [mlp, hidden]           GELU (tanh) after
    block<i>.mlp.fc2     Linear  [hidden, mlp]
    block<i>.ada         Linear  [6 hidden, hidden]      adaLN-Zero: shift, scale, gate (attn), (MLP)
    final_ada            Linear  [2 hidden, hidden]      shift, scale of the final LayerNorm
    final_linear         Linear  [p p C, hidden]         each token's p x p x C pixels, (p, q, c) order
"""

from __future__ import annotations

import numpy as np

from ddm.workers.dit.config import DiTConfig


def canonical_shapes(cfg: DiTConfig) -> dict[str, tuple[int, ...]]:
    """name -> shape of every parameter in the canonical layout (weights and biases)."""
    h, p, c = cfg.hidden_size, cfg.patch_size, cfg.in_channels
    linears = {"t_mlp1": (h, cfg.freq_dim), "t_mlp2": (h, h)}
    for i in range(cfg.depth):
        linears |= {
            f"block{i}.attn.qkv": (3 * h, h),
            f"block{i}.attn.proj": (h, h),
            f"block{i}.mlp.fc1": (cfg.mlp_hidden, h),
            f"block{i}.mlp.fc2": (h, cfg.mlp_hidden),
            f"block{i}.ada": (6 * h, h),
        }
    linears |= {"final_ada": (2 * h, h), "final_linear": (p * p * c, h)}
    shapes = {"patch_embed.weight": (h, c, p, p), "patch_embed.bias": (h,)}
    if cfg.text_width:
        linears["text_embed"] = (h, cfg.text_width)
    else:
        shapes["y_embed.weight"] = (cfg.num_classes + 1, h)
    for name, (out, inp) in linears.items():
        shapes[f"{name}.weight"] = (out, inp)
        shapes[f"{name}.bias"] = (out,)
    return shapes


def parameter_count(cfg: DiTConfig) -> int:
    return int(sum(np.prod(s) for s in canonical_shapes(cfg).values()))


def _sincos_1d(dim: int, positions: np.ndarray) -> np.ndarray:
    """[M] positions -> [M, dim]: sin of the first dim/2 frequencies, then cos (DiT's MAE-style table)."""
    omega = 1.0 / 10000 ** (np.arange(dim // 2, dtype=np.float64) / (dim / 2.0))
    out = positions.reshape(-1)[:, None] * omega[None, :]
    return np.concatenate([np.sin(out), np.cos(out)], axis=1)


def pos_embed_2d(hidden: int, grid: int) -> np.ndarray:
    """The fixed position table, float32 [grid * grid, hidden], tokens in row-major (row, column) order:
    the first half of each row embeds the token's column, the second its row (Peebles & Xie's
    get_2d_sincos_pos_embed, whose meshgrid puts the width first)."""
    gw, gh = np.meshgrid(np.arange(grid, dtype=np.float64), np.arange(grid, dtype=np.float64))
    table = np.concatenate([_sincos_1d(hidden // 2, gw), _sincos_1d(hidden // 2, gh)], axis=1)
    return table.astype(np.float32)
