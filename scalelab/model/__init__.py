"""The model: Llama-style decoder, its shapes and presets, and pure parameter/FLOP counts.

    from scalelab.model import build_model, resolve_shape, param_counts, flops_per_token
    model = build_model(cfg.model, vocab_size=256); model.init_weights(seed=0, std=0.02)

The counts, shapes and presets are pure Python; ``Llama`` (and torch) is imported only
when first used, so planners that count parameters and FLOPs never load torch.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from scalelab.config import ModelConfig
from scalelab.model.counts import ParamCounts, flops_per_token, matmul_params, param_counts
from scalelab.model.presets import PRESETS, resolve_shape
from scalelab.model.shape import ModelShape

if TYPE_CHECKING:
    from scalelab.model.llama import Llama

__all__ = [
    "PRESETS",
    "Llama",
    "ModelShape",
    "ParamCounts",
    "build_model",
    "flops_per_token",
    "matmul_params",
    "param_counts",
    "resolve_shape",
]


def build_model(cfg: ModelConfig, vocab_size: int) -> Llama:
    """The module for ``cfg`` (weights not initialised: call ``init_weights``)."""
    from scalelab.model.llama import Llama

    return Llama(resolve_shape(cfg), vocab_size, objective=cfg.objective)


def __getattr__(name: str):
    if name == "Llama":
        from scalelab.model.llama import Llama

        return Llama
    raise AttributeError(f"module 'scalelab.model' has no attribute {name!r}")
