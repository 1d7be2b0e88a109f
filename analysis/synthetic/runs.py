"""Small synthetic runs tables in the ``scalelab collect`` schema (``scalelab.sweep.view.collect``).

For notebooks and tests that must run without a real sweep. ``synthetic_runs``: losses
from the DataConstrained law at Muennighoff et al.'s published constants
(analysis.tables.published) times log-normal noise; one DIVERGED and one FAILED run are included
so the exclusion notes show. ``synthetic_isoflop_runs``: an isoFLOP sweep from the
Chinchilla law, whose compute-optimal exponents are known. Every value is labelled
synthetic in the ``name`` column.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import numpy as np
import polars as pl

from analysis.laws.allocation import compute_optimal
from analysis.laws.laws import Chinchilla, DataConstrained
from analysis.tables.published import HOFFMANN, MUENNIGHOFF

__all__ = ["synthetic_isoflop_runs", "synthetic_runs"]


def synthetic_runs(seed: int = 0, noise: float = 0.003) -> pl.DataFrame:
    """29 runs: 12 single-epoch runs over four unique-token budgets (N <= N_opt(U)), a
    repeated-data block at U = 2e8 (5 sizes N = 3e6..3e8 at 2, 8 and 32 epochs), one
    DIVERGED and one FAILED run."""
    law = DataConstrained()
    rows: list[tuple[float, float, float]] = []  # (N, D_total, D_unique)
    for U in np.geomspace(2e8, 2e10, 4):
        for N in np.geomspace(2e6, 0.9 * float(law.n_opt(MUENNIGHOFF, U)), 3):
            rows.append((float(N), float(U), float(U)))
    for N in (3e6, 1e7, 3e7, 1e8, 3e8):
        for ep in (2, 8, 32):
            rows.append((N, 2e8 * ep, 2e8))
    N, D, U = (np.array(c) for c in zip(*rows))
    rng = np.random.default_rng(seed)
    loss = law.predict(MUENNIGHOFF, {"N": N, "D": D, "U": U}) * np.exp(rng.normal(0, noise, N.size))
    n = N.size
    state = ["COMPLETED"] * n + ["DIVERGED", "FAILED"]
    N = np.append(N, [1e8, 3e7])
    D = np.append(D, [2e8 * 32, 2e8 * 16])
    U = np.append(U, [2e8, 2e8])
    final = np.append(loss, [np.nan, 4.0])
    return pl.DataFrame(
        {
            "run_id": [f"syn{i:04d}" for i in range(n + 2)],
            "name": [f"synthetic-{i}" for i in range(n + 2)],
            "state": state,
            "N": N,
            "N_non_embedding": 0.9 * N,
            "D_unique": U,
            "D_total": D,
            "epochs": D / U,
            "flops": 6.0 * N * D,
            "final_loss": final,
            "best_loss": final,
            "wall_time_s": np.full(n + 2, 1.0),
        }
    )


def synthetic_isoflop_runs(
    params: Mapping[str, float] = HOFFMANN,
    budgets: Sequence[float] = (1e18, 1e19, 1e20, 1e21, 1e22),
    *,
    per_budget: int = 9,
    span: float = 1.0,
    offset: float | Sequence[float] = 0.0,
    noise: float = 0.002,
    seed: int = 0,
) -> pl.DataFrame:
    """An isoFLOP sweep in the ``scalelab collect`` schema: per compute budget C,
    ``per_budget`` model sizes log-spaced over ``span`` decades either side of
    10^offset x the true N_opt(C) (``offset``: one value or one per budget), D = C/(6N),
    losses from the Chinchilla law at ``params`` (default Hoffmann et al.'s) times
    log-normal noise of sd ``noise``. The truth: N_opt ∝ C^(beta/(alpha+beta)),
    D_opt ∝ C^(alpha/(alpha+beta)) (Hoffmann et al. 2022, eq. 4)."""
    budgets = np.asarray(budgets, dtype=float)
    shift = np.broadcast_to(np.asarray(offset, dtype=float), budgets.shape)
    n_opt, _ = compute_optimal(params, budgets)
    steps = np.linspace(-span, span, per_budget)
    N = (n_opt[:, None] * 10.0 ** (shift[:, None] + steps[None, :])).ravel()
    C = np.repeat(budgets, per_budget)
    D = C / (6.0 * N)
    rng = np.random.default_rng(seed)
    loss = Chinchilla().predict(params, {"N": N, "D": D}) * np.exp(rng.normal(0, noise, N.size))
    n = N.size
    return pl.DataFrame(
        {
            "run_id": [f"iso-{c:.3g}-{i % per_budget}" for i, c in enumerate(C)],
            "name": [f"synthetic-isoflop-{c:.3g}-{i % per_budget}" for i, c in enumerate(C)],
            "state": ["COMPLETED"] * n,
            "N": N,
            "N_non_embedding": 0.9 * N,
            "D_unique": D,
            "D_total": D,
            "epochs": np.ones(n),
            "flops": C,
            "final_loss": loss,
            "best_loss": loss,
            "wall_time_s": np.ones(n),
        }
    )
