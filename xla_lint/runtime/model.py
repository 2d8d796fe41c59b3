"""A small Llama-style decoder and its synthetic token data.

Shapes use ``B`` (batch), ``S`` (sequence length), ``D`` (``dim``), ``H`` (heads),
``V`` (vocabulary). The model is deliberately plain PyTorch so that FSDPv2 can wrap
each :class:`DecoderLayer` (``transformer_auto_wrap_policy``), exactly like
examples/fsdp/train_decoder_only_fsdp_v2.py in pytorch/xla.
"""

from __future__ import annotations

import math

import torch
from torch import nn
from torch.nn import functional as F


class RMSNorm(nn.Module):
    """Root-mean-square layer norm over the last dimension: ``(..., D) -> (..., D)``."""

    def __init__(self, dim: int, eps: float = 1e-6) -> None:
        super().__init__()
        self.weight = nn.Parameter(torch.ones(dim))
        self.eps = eps

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        var = x.pow(2).mean(-1, keepdim=True)
        return x * torch.rsqrt(var + self.eps) * self.weight


def rotary_tables(
    seq_len: int, head_dim: int, base: float = 10000.0
) -> tuple[torch.Tensor, torch.Tensor]:
    """cos and sin tables for rotary position embeddings, each ``(S, head_dim // 2)``."""
    inv = 1.0 / base ** (torch.arange(0, head_dim, 2, dtype=torch.float32) / head_dim)
    ang = torch.outer(torch.arange(seq_len, dtype=torch.float32), inv)
    return ang.cos(), ang.sin()


def apply_rotary(x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor) -> torch.Tensor:
    """Rotate pairs of features of ``x`` ``(B, H, S, hd)`` by the position angles."""
    x1, x2 = x[..., 0::2], x[..., 1::2]
    out = torch.stack((x1 * cos - x2 * sin, x1 * sin + x2 * cos), dim=-1)
    return out.flatten(-2)


class Attention(nn.Module):
    """Causal multi-head self-attention with rotary embeddings: ``(B, S, D) -> (B, S, D)``."""

    def __init__(self, dim: int, heads: int) -> None:
        super().__init__()
        self.heads = heads
        self.head_dim = dim // heads
        self.q_proj = nn.Linear(dim, dim, bias=False)
        self.k_proj = nn.Linear(dim, dim, bias=False)
        self.v_proj = nn.Linear(dim, dim, bias=False)
        self.o_proj = nn.Linear(dim, dim, bias=False)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        b, s, d = x.shape
        q, k, v = (
            p(x).view(b, s, self.heads, self.head_dim).transpose(1, 2)
            for p in (self.q_proj, self.k_proj, self.v_proj)
        )
        cos, sin = rotary_tables(s, self.head_dim)
        cos, sin = cos.to(x.device), sin.to(x.device)
        q, k = apply_rotary(q, cos, sin), apply_rotary(k, cos, sin)
        scores = q @ k.transpose(-2, -1) / math.sqrt(self.head_dim)
        mask = torch.ones(s, s, dtype=torch.bool, device=x.device).tril()
        scores = scores.masked_fill(~mask, float("-inf"))
        out = scores.softmax(-1) @ v
        return self.o_proj(out.transpose(1, 2).reshape(b, s, d))


class MLP(nn.Module):
    """SwiGLU feed-forward block: ``(B, S, D) -> (B, S, D)`` through a hidden size of ``4 D``."""

    def __init__(self, dim: int) -> None:
        super().__init__()
        hidden = 4 * dim
        self.gate_proj = nn.Linear(dim, hidden, bias=False)
        self.up_proj = nn.Linear(dim, hidden, bias=False)
        self.down_proj = nn.Linear(hidden, dim, bias=False)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.down_proj(F.silu(self.gate_proj(x)) * self.up_proj(x))


class DecoderLayer(nn.Module):
    """Pre-norm transformer block (the unit FSDPv2 wraps): ``(B, S, D) -> (B, S, D)``."""

    def __init__(self, dim: int, heads: int) -> None:
        super().__init__()
        self.input_layernorm = RMSNorm(dim)
        self.self_attn = Attention(dim, heads)
        self.post_attention_layernorm = RMSNorm(dim)
        self.mlp = MLP(dim)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = x + self.self_attn(self.input_layernorm(x))
        return x + self.mlp(self.post_attention_layernorm(x))


class DecoderOnlyModel(nn.Module):
    """Token ids ``(B, S)`` int64 -> logits ``(B, S, V)`` float32."""

    def __init__(self, vocab: int, dim: int, layers: int, heads: int) -> None:
        super().__init__()
        self.embed_tokens = nn.Embedding(vocab, dim)
        self.layers = nn.ModuleList(DecoderLayer(dim, heads) for _ in range(layers))
        self.norm = RMSNorm(dim)
        self.lm_head = nn.Linear(dim, vocab, bias=False)

    def forward(self, tokens: torch.Tensor) -> torch.Tensor:
        x = self.embed_tokens(tokens)
        for layer in self.layers:
            x = layer(x)
        return self.lm_head(self.norm(x))


def synthetic_tokens(
    batch: int, seq_len: int, vocab: int, generator: torch.Generator
) -> torch.Tensor:
    """A learnable synthetic batch ``(batch, seq_len + 1)`` int64 on the CPU.

    Every sequence follows ``t[i+1] = (5 * t[i] + 3) mod vocab`` from a random start,
    so the next token is a fixed function of the current one and a decoder's loss
    falls within a few optimizer steps. Inputs are ``[:, :-1]``, targets ``[:, 1:]``.
    """
    start = torch.randint(0, vocab, (batch, 1), generator=generator)
    cols = [start]
    for _ in range(seq_len):
        cols.append((5 * cols[-1] + 3) % vocab)
    return torch.cat(cols, dim=1)


def load_user_model(spec: str, seed: int) -> nn.Module:
    """Import ``module:function`` (the current directory first on ``sys.path``), call it
    with no arguments after ``torch.manual_seed(seed)`` and return the ``nn.Module``.

    Every failure is an :class:`~xla_lint.runtime.options.OptionsError` naming ``--model``:
    the module does not import, has no such function, the function raises or returns
    something that is not an ``nn.Module``.
    """
    import importlib
    import os
    import sys

    from .options import OptionsError
    from .progress import first_line

    module_name, _, fn_name = spec.partition(":")
    if os.getcwd() not in sys.path:
        sys.path.insert(0, os.getcwd())
    try:
        module = importlib.import_module(module_name)
    except ModuleNotFoundError as exc:
        if exc.name and module_name.startswith(exc.name):
            raise OptionsError(
                f"--model {spec}: no module named {exc.name!r} (run from the folder that holds it, "
                "or put that folder on PYTHONPATH)"
            ) from None
        raise OptionsError(
            f"--model {spec}: importing {module_name} raised {first_line(exc)}"
        ) from None
    except Exception as exc:
        raise OptionsError(
            f"--model {spec}: importing {module_name} raised {first_line(exc)}"
        ) from None
    fn = getattr(module, fn_name, None)
    if not callable(fn):
        found = "is not callable" if hasattr(module, fn_name) else "does not exist"
        raise OptionsError(
            f"--model {spec}: {module_name}.{fn_name} {found}; --model names a function that "
            "takes no arguments and returns an nn.Module"
        )
    torch.manual_seed(seed)
    try:
        model = fn()
    except Exception as exc:
        raise OptionsError(f"--model {spec}: {fn_name}() raised {first_line(exc)}") from None
    if not isinstance(model, nn.Module):
        raise OptionsError(
            f"--model {spec}: {fn_name}() returned {type(model).__name__}, not a torch.nn.Module"
        )
    return model
