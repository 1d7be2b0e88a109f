"""Named model shapes.

Kim et al. 2025, "Pre-training under infinite compute" (arXiv 2509.14786; marin
``experiments/data_efficiency``): Llama shapes named by their total untied parameter
count at the Llama-3 vocabulary of 128,256 (see ``counts.py``): 154.1M, 299.6M, 602.5M,
1.43B. "70M" (71.4M) is ours, not Kim's: the 150M's depth at half its width, one ~2x step
below it, the fifth size of ``sweeps/200M_tokens.yaml`` (Kim's four leave the asymptote on one
residual degree of freedom).

CPU ladder: total parameters at the byte vocabulary (256), within 8% of the name
(tests/scalelab/test_counts.py prints and checks them). Widths grow with depth; head_dim
is 16 or 32 (8-20 below 50k); d_ff ≈ 8/3·d_model rounded to a multiple of 16 (Llama's SwiGLU ratio).
"""

from __future__ import annotations

from scalelab.config import ModelConfig
from scalelab.errors import UserError, did_you_mean
from scalelab.model.shape import ModelShape

__all__ = ["KIM_VOCAB_SIZE", "PRESETS", "resolve_shape"]

#: Llama-3 tokenizer vocabulary used by Kim et al. 2025.
KIM_VOCAB_SIZE = 128256


def _shape(d: int, layers: int, heads: int, kv_heads: int, d_ff: int) -> ModelShape:
    return ModelShape(d_model=d, n_layers=layers, n_heads=heads, n_kv_heads=kv_heads, d_ff=d_ff)


PRESETS: dict[str, ModelShape] = {
    # CPU ladder (vocab 256): name ~ total parameters.
    # Below 50k (the CPU twin's small end, docs/calibration.md): embedding-dominated like
    # Kim's 150M (85% embedding at vocab 128k); head_dim 8-20, d_ff ~ 2-3 d_model.
    "cpu-2.2k": _shape(4, 1, 1, 1, 8),  # 2,220
    "cpu-5k": _shape(8, 1, 1, 1, 16),  # 4,760
    "cpu-10k": _shape(12, 2, 1, 1, 32),  # 9,660
    "cpu-15k": _shape(16, 2, 1, 1, 48),  # 14,928
    "cpu-25k": _shape(24, 2, 2, 2, 64),  # 26,232
    "cpu-50k": _shape(32, 3, 2, 2, 80),  # 51,936
    "cpu-80k": _shape(40, 3, 2, 2, 112),  # 80,280
    "cpu-100k": _shape(48, 3, 3, 3, 128),  # 107,856
    "cpu-250k": _shape(64, 4, 4, 4, 176),  # 234,048
    "cpu-500k": _shape(96, 4, 6, 6, 256),  # 492,384
    "cpu-1m": _shape(128, 5, 4, 4, 336),  # 1,039,744
    "cpu-2m": _shape(160, 6, 5, 5, 432),  # 1,942,560
    "cpu-5m": _shape(256, 6, 8, 8, 688),  # 4,877,568
    # The CPU twin's ladder (sweeps/tiny_infinite_compute.yaml, docs/calibration.md y1-y2):
    # one shape family, 2 layers and 2 heads, only the width grows (8..96; d_ff ~ 8/3 d
    # rounded to 4), so no size is a favoured shape of its own (the cpu-* ladder's mixed
    # depths and head counts left per-size residuals of ~0.02 nats in the twin's fits).
    "twin-5.6k": _shape(8, 2, 2, 2, 20),  # 5,608
    "twin-10k": _shape(12, 2, 2, 2, 32),  # 9,660
    "twin-15k": _shape(16, 2, 2, 2, 44),  # 14,544
    "twin-26k": _shape(24, 2, 2, 2, 64),  # 26,232 (= cpu-25k)
    "twin-41k": _shape(32, 2, 2, 2, 84),  # 40,864
    "twin-80k": _shape(48, 2, 2, 2, 128),  # 80,112
    "twin-132k": _shape(64, 2, 2, 2, 172),  # 131,904
    "twin-271k": _shape(96, 2, 2, 2, 256),  # 270,816
    # Kim et al. 2025 (arXiv 2509.14786): hidden, layers, heads, KV heads, intermediate.
    # "70M" is ours (not in Kim et al.): the 150M's 6 layers at half its width (head_dim 64,
    # d_ff 3.5 d like all four), 71,372,032 parameters at vocab 128,256 (92% embedding).
    "70M": _shape(256, 6, 4, 4, 896),
    "150M": _shape(512, 6, 8, 8, 1792),
    "300M": _shape(768, 12, 12, 12, 2688),
    "600M": _shape(1024, 24, 16, 8, 3584),
    "1.4B": _shape(2048, 16, 16, 8, 7168),
}


_SHAPE_KEYS = ("d_model", "n_layers", "n_heads", "n_kv_heads", "d_ff")


def resolve_shape(cfg: ModelConfig) -> ModelShape:
    """The preset's shape (if any), then every explicit field of ``cfg`` on top.

    Without a preset, d_model, n_layers, n_heads and d_ff are required; n_kv_heads
    defaults to n_heads. ``tie_embeddings``, ``rope_theta`` and ``norm_eps`` always come
    from ``cfg`` (they have defaults there).
    """
    values: dict[str, object] = {}
    if cfg.preset is not None:
        if cfg.preset not in PRESETS:
            raise UserError(
                f"unknown preset {cfg.preset!r}{did_you_mean(cfg.preset, PRESETS)}; "
                f"known: {', '.join(PRESETS)}",
                key="model.preset",
            )
        base = PRESETS[cfg.preset]
        values.update({k: getattr(base, k) for k in _SHAPE_KEYS})
    for key in _SHAPE_KEYS:
        value = getattr(cfg, key)
        if value is not None:
            values[key] = value
    if "n_kv_heads" not in values and "n_heads" in values:
        values["n_kv_heads"] = values["n_heads"]
    for key in _SHAPE_KEYS:
        if key not in values:
            raise UserError("required when model.preset is null", key=f"model.{key}")
    shape = ModelShape(
        **values,
        tie_embeddings=cfg.tie_embeddings,
        rope_theta=cfg.rope_theta,
        norm_eps=cfg.norm_eps,
    )
    return shape.validate()
