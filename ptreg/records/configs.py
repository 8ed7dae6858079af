"""The model configurations an evaluator can name, and the products one training step makes.

Each configuration is a small byte-level GPT (see ``engine/workloads/tinygpt.py``); its
linear layers are the matrix products every workload measures, as a whole training step or
kernel by kernel. The table is part of the evaluator format: ``"configs": ["xl"]`` means
these dimensions, and changing them would change what every frozen evaluator measures.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal


@dataclass(frozen=True)
class GPTConfig:
    name: str
    context: int  # T: sequence length of a training batch (and size of the position table)
    layers: int  # L: transformer blocks
    d_model: int  # C: channels of the residual stream
    batch: int  # B: sequences per training step
    heads: int  # NH: attention heads; head size is C // NH
    vocab: int = 256  # V: bytes

    @property
    def tokens_per_step(self) -> int:
        return self.batch * self.context

    @property
    def parameters(self) -> int:
        """V·C + T·C + L·(12C² + 13C) + 2C: the model's weights, as
        ``engine/workloads/tinygpt.py:parameter_shapes`` lays them out (a test holds them equal)."""
        V, T, L, C = self.vocab, self.context, self.layers, self.d_model
        return V * C + T * C + L * (12 * C * C + 13 * C) + 2 * C


CONFIGS: dict[str, GPTConfig] = {
    c.name: c
    for c in (
        GPTConfig("tiny", context=16, layers=2, d_model=32, batch=4, heads=2),  # for tests
        GPTConfig("small", context=64, layers=3, d_model=96, batch=16, heads=3),
        GPTConfig("medium", context=96, layers=4, d_model=128, batch=16, heads=4),
        GPTConfig("large", context=128, layers=6, d_model=192, batch=12, heads=6),
        GPTConfig("xl", context=128, layers=8, d_model=256, batch=8, heads=8),
    )
}
# The names as the evaluator format spells them; a test holds them equal to the table's.
ConfigName = Literal["tiny", "small", "medium", "large", "xl"]
# The linear layers ``linear_shapes`` names, as a condition may name them; a test holds them equal.
LayerName = Literal["qkv", "attn_proj", "fc", "mlp_proj", "head"]


def flops(m: int, k: int, n: int) -> int:
    """Floating-point operations of one call of any of the three kernels: 2·M·K·N."""
    return 2 * m * k * n


@dataclass(frozen=True)
class LinearShape:
    """One kind of linear layer: the product (M×K)·(K×N), and how often it runs per step.

    ``per_step`` is the number of calls of *each* of the three kernels for this layer kind
    in one training step (one forward, one dA and one dB per layer instance).
    """

    name: str
    m: int
    k: int
    n: int
    per_step: int

    @property
    def flops(self) -> int:
        return flops(self.m, self.k, self.n)


def linear_shapes(config: GPTConfig) -> list[LinearShape]:
    """The distinct linear layers of one training step, in the order the forward meets them."""
    M, C, L = config.tokens_per_step, config.d_model, config.layers
    return [
        LinearShape("qkv", M, C, 3 * C, L),
        LinearShape("attn_proj", M, C, C, L),
        LinearShape("fc", M, C, 4 * C, L),
        LinearShape("mlp_proj", M, 4 * C, C, L),
        LinearShape("head", M, C, config.vocab, 1),
    ]


def step_flops(config: GPTConfig) -> int:
    """Floating-point operations of one kernel's calls over a training step's linear layers."""
    return sum(s.per_step * s.flops for s in linear_shapes(config))
