# ---
# jupyter:
#   jupytext:
#     formats: py:percent
#     text_representation:
#       extension: .py
#       format_name: percent
#   kernelspec:
#     display_name: Python 3
#     language: python
#     name: python3
# ---

# %% [markdown]
# # 2. Reproduce Epoch's Chinchilla table
#
# Besiroglu et al. 2024 ("Chinchilla Scaling: A replication attempt", arXiv 2404.10102)
# refit Hoffmann et al.'s approach 3 on 240 points digitised from their Figure 4: the
# summed Huber loss (delta 1e-3) of log-space residuals of
# L = E + A/N^alpha + B/D^beta, from a grid of 4,500 starts. Data: `analysis/data/`
# (see its README for the citation).

# %%
import os
import time

import numpy as np
import polars as pl

from analysis import Chinchilla, fit_law, load_epoch_chinchilla
from analysis.notebook_figures import show
from analysis.plots import plot_isoflop, plot_residuals
from analysis.published import EPOCH, EPOCH_SE, HOFFMANN
from analysis.recipes import compute_optimal

n_boot = int(os.environ.get("ANALYSIS_BOOTSTRAP", "200"))
data = load_epoch_chinchilla()
print(data.height, "points after dropping the 5 highest losses")

# %% [markdown]
# ## The full-grid fit

# %%
t0 = time.perf_counter()
fit = fit_law(Chinchilla(), data, warn=False)
print(f"{fit.n_starts} starts, {time.perf_counter() - t0:.1f} s; objective {fit.objective:.8f}")
for w in fit.warnings:
    print("warning:", w)

# %% [markdown]
# ## Bootstrap SEs and the comparison table
#
# A and B sit in a flat valley (the warning above): the grid optimum and Epoch's point
# differ along it with the same objective, so compare E, alpha, beta and predictions.

# %%
boot = fit.bootstrap(n_boot, seed=0)
ci = boot.ci()
table = pl.DataFrame(
    {
        "param": list(EPOCH),
        "ours": [fit.params[p] for p in EPOCH],
        "epoch": [EPOCH[p] for p in EPOCH],
        "rel_diff": [fit.params[p] / EPOCH[p] - 1 for p in EPOCH],
        "se_ours": [boot.se[p] for p in EPOCH],
        "se_epoch": [EPOCH_SE[p] for p in EPOCH],
        "ci95_lo": [ci[p][0] for p in EPOCH],
        "ci95_hi": [ci[p][1] for p in EPOCH],
        "hoffmann": [HOFFMANN[p] for p in EPOCH],
    }
)
print(f"bootstrap: {boot.n} seeded resamples (Epoch used 4,000)")
print(table)
pred_gap = np.max(np.abs(fit.predict(data) - Chinchilla().predict(EPOCH, data)))
print(f"largest prediction gap to Epoch's fit over the 240 points: {pred_gap:.2e}")

# %% [markdown]
# ## Compute-optimal allocation (Chinchilla's 5.76e23 FLOP budget)

# %%
for name, params in (("ours", fit.params), ("Epoch", EPOCH), ("Hoffmann", HOFFMANN)):
    n_opt, d_opt = compute_optimal(params, 5.76e23)
    a = params["beta"] / (params["alpha"] + params["beta"])
    print(
        f"{name:9s} a = {a:.3f}  N_opt = {n_opt:.3g}  D_opt = {d_opt:.3g}  "
        f"tokens/param = {d_opt / n_opt:.1f}"
    )

# %%
show(plot_isoflop(data, fit, title="Epoch's Chinchilla points, fitted"), "isoflop")
show(plot_residuals(data, fit), "residuals")
