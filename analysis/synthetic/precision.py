"""A synthetic precision twin in the ``scalelab collect`` schema: formats x sizes x epochs at
one unique-token budget U, losses from the precision law (laws/precision.py) with known
truth plus Gaussian noise in nats. For tests and docs; every row is named synthetic.

Truth: Hoffmann et al.'s constants (analysis.tables.published.HOFFMANN) with Muennighoff et
al.'s R_D* = 15.4, and Kumar et al.'s N_eff = N (1 - exp(-P / gamma)); ``kappa`` {format:
k} adds a gap that changes with N: N_eff times (N / N0)^k, N0 the geometric mean size.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import numpy as np
import polars as pl

from analysis.laws.precision import PrecisionLaw
from analysis.laws.precision_bits import bits_of
from analysis.tables.published import HOFFMANN

__all__ = ["PRECISION_TRUTH", "synthetic_precision_runs", "true_multipliers"]

PRECISION_TRUTH = {**HOFFMANN, "R_D": 15.4, "gamma": 2.5}
"""Default truth (gamma = 2.5 bits: m = 0.82 for MXFP4 against bf16, 0.83 for NVFP4, 0.96 for FP8)."""

FORMATS = ("bf16", "fp8", "nvfp4", "mxfp4")
SIZES = (1e6, 3e6, 1e7, 3e7)
EPOCHS = (1, 2, 4, 8)
COLUMN = "train.precision"


def true_multipliers(gamma: float, formats: Sequence[str], reference: str) -> dict[str, float]:
    """m_f = (1 - e^{-P_f / gamma}) / (1 - e^{-P_ref / gamma}) per format."""
    r = -np.expm1(-bits_of(reference) / gamma)
    return {f: float(-np.expm1(-bits_of(f) / gamma) / r) for f in formats}


def synthetic_precision_runs(
    seed: int = 0,
    *,
    noise: float = 0.01,
    formats: Sequence[str] = FORMATS,
    sizes: Sequence[float] = SIZES,
    epochs: Sequence[float] = EPOCHS,
    U: float = 1e8,
    truth: Mapping[str, float] | None = None,
    kappa: Mapping[str, float] | None = None,
) -> pl.DataFrame:
    """Runs of every (format, size, epochs); loss = law + N(0, ``noise``) nats."""
    t = {**PRECISION_TRUTH, **(truth or {})}
    rows = [(f, float(n), float(e)) for f in formats for n in sizes for e in epochs]
    fmt, N, ep = (np.array(c) for c in zip(*rows))
    N, ep = N.astype(float), ep.astype(float)
    P = np.array([bits_of(f) for f in fmt])
    law = PrecisionLaw(formats=tuple(formats), mode="gamma")
    X = {"N": N, "D": U * ep, "U": np.full(N.size, U), "P": P, "fmt": np.ones(N.size)}
    if kappa:
        n0 = float(np.exp(np.mean(np.log(np.asarray(sizes, dtype=float)))))
        k = np.array([float(kappa.get(f, 0.0)) for f in fmt])
        X["N"] = N * (N / n0) ** k  # the same N_eff as m_f (N / N0)^k_f
    loss = law.predict({p: t[p] for p in law.param_names}, X)
    loss = loss + np.random.default_rng(seed).normal(0.0, noise, N.size)
    n = N.size
    return pl.DataFrame({
        "run_id": [f"synprec{i:04d}" for i in range(n)],
        "name": [f"synthetic-precision-{i}" for i in range(n)],
        "state": ["COMPLETED"] * n,
        "N": N,
        "D_unique": np.full(n, U),
        "D_total": U * ep,
        "epochs": ep,
        "final_loss": loss,
        COLUMN: list(fmt),
    })
