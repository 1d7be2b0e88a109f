"""Synthetic runs tables of two recipes across epochs at one unique-token budget, with known
truth (the recipes-across-epochs tests).

Both recipes follow Muennighoff et al.'s data-constrained law (arXiv 2305.16264) with their
C4 base constants (A 520, B 1611, E 1.855, alpha = beta 0.3526) at U = 1e8 tokens, sizes
0.5M-4M (all below N_opt(U) = 4.0M, so R_N* plays no part):

- ``ar``: R_D* = 15 (Muennighoff's value): its loss levels off after a few tens of epochs;
- ``mdm``: A x 1.03, B x 1.3 (worse per token at one epoch) and R_D* = 500 (Prabhudesai et
  al. 2025, arXiv 2507.15857: diffusion keeps improving for hundreds of epochs).

mdm overtakes ar at 58.2, 50.4, 45.1 and 41.3 epochs at the four sizes. Each (recipe, N,
epochs) has two lr cells, the worse 0.05 nats above (the best-cell rule must pick the
other); every run's loss gets Gaussian noise ``noise``; mdm's runs carry a Monte Carlo SE
``se`` and ``loss_is_bound`` True, ar's a null SE and False.
"""

from __future__ import annotations

import numpy as np
import polars as pl
from scipy.optimize import brentq

from analysis.laws.laws import DataConstrained

U = 1e8
SIZES = (5e5, 1e6, 2e6, 4e6)
EPOCHS = (1, 2, 4, 8, 16, 32, 64, 128, 256)
BASE = {"A": 520.0, "B": 1611.0, "E": 1.855, "alpha": 0.3526, "beta": 0.3526, "R_N": 1e6}
TRUTH = {"ar": {**BASE, "R_D": 15.0},
         "mdm": {**BASE, "A": 1.03 * 520.0, "B": 1.3 * 1611.0, "R_D": 500.0}}
LAW = DataConstrained()


def true_loss(params: dict, n: float, epochs) -> np.ndarray:
    e = np.atleast_1d(np.asarray(epochs, dtype=float))
    return LAW.predict(params, {"N": np.full(e.size, float(n)), "D": U * e, "U": np.full(e.size, U)})


def true_crossover(n: float, truth: dict = TRUTH, hi: float = 256.0) -> float:
    """The epoch where mdm's true loss falls below ar's at size n."""
    f = lambda x: float(true_loss(truth["mdm"], n, np.exp(x))[0] - true_loss(truth["ar"], n, np.exp(x))[0])  # noqa: E731
    return float(np.exp(brentq(f, 0.0, np.log(hi))))


def study(seed: int = 0, *, noise: float = 0.01, se: float = 0.005, truth: dict = TRUTH, sizes=SIZES,
          epochs=EPOCHS, seeds: int = 1, epochs_of: dict | None = None) -> pl.DataFrame:
    """The runs table (module docstring); ``epochs_of``: recipe -> its own epoch grid."""
    rng = np.random.default_rng(seed)
    rows = []
    for recipe, params in truth.items():
        grid = (epochs_of or {}).get(recipe, epochs)
        for n in sizes:
            y = true_loss(params, n, grid)
            for e, level in zip(grid, y):
                for lr, worse in ((1e-3, 0.05), (3e-3, 0.0)):
                    for s in range(seeds):
                        rows.append({
                            "block": recipe, "name": f"{recipe}-{n:g}-{e}-{lr}-{s}",
                            "run_id": f"{recipe}{n:g}e{e}lr{lr}s{s}", "state": "COMPLETED", "N": int(n),
                            "D_unique": int(U), "D_total": int(U * e), "epochs": float(e), "optim.lr": lr,
                            "data.epochs": float(e), "seed": s, "model.objective": recipe,
                            "final_loss": float(level + worse + noise * rng.standard_normal()),
                            "final_loss_se": se if recipe == "mdm" else None,
                            "loss_is_bound": recipe == "mdm"})
    return pl.DataFrame(rows, schema_overrides={"final_loss_se": pl.Float64})
