"""Putting ``QuantLinear`` into a model, and setting the step its SR keys take.

``quantize_linears`` replaces every ``nn.Linear`` inside the transformer blocks (the
attention and MLP projections) by a ``QuantLinear`` holding the same parameter objects;
the embedding, the norms and the LM head stay fp32 (the head's GEMM feeds the loss, which
the formats' papers keep in high precision; NVIDIA's NVFP4 recipe, arXiv 2509.25149, also
keeps some layers in BF16). Each layer's ``quant_id`` is the CRC-32 of its module name, so
ids do not depend on construction order or on which other layers exist.
"""

from __future__ import annotations

import zlib

from torch import nn

from scalelab.quant.linear import QuantLinear
from scalelab.quant.recipes import RECIPES

__all__ = ["quantize_linears", "set_quant_step"]

BLOCKS_PREFIX = "layers."
"""Module names under this prefix are the transformer blocks (``scalelab.model.llama``)."""


def quantize_linears(model: nn.Module, precision: str) -> nn.Module:
    """Swap the blocks' ``nn.Linear`` modules for ``QuantLinear`` with ``RECIPES[precision]``
    (in place; returns ``model``). Parameters are shared, not copied."""
    recipe = RECIPES[precision]
    targets = [(name, m) for name, m in model.named_modules()
               if type(m) is nn.Linear and name.startswith(BLOCKS_PREFIX)]
    for name, old in targets:
        new = QuantLinear(old.in_features, old.out_features, bias=old.bias is not None,
                          recipe=recipe, quant_id=zlib.crc32(name.encode()), device="meta")
        new.weight = old.weight
        if old.bias is not None:
            new.bias = old.bias
        parent_name, _, child = name.rpartition(".")
        setattr(model.get_submodule(parent_name) if parent_name else model, child, new)
    return model


def set_quant_step(model: nn.Module, step: int, seed: int) -> None:
    """Key the next forward/backward's SR at (``seed``, ``step``) and restart the call counts
    (a no-op for a model without ``QuantLinear``)."""
    for m in model.modules():
        if isinstance(m, QuantLinear):
            m.quant_seed, m.quant_step, m.quant_calls = int(seed), int(step), 0
