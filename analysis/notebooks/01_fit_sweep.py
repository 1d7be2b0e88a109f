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
# # 1. A scalelab sweep: training curves, norms, and its scaling laws
#
# Set `SWEEP` to a sweep directory. It reads `runs.parquet` (`scalelab collect SWEEP` writes
# it) and every run's `evals` and `norms` records with one `pl.scan_parquet` each (runs
# still in progress included, from their part files), then fits through `analysis`.
# Without a sweep it falls back to a **synthetic** runs table in the same schema (losses
# drawn from Muennighoff et al.'s published law plus noise), labelled as such.
# Figures show inline; with `ANALYSIS_OUT` set they are also saved there.
#
# **Parameters** are declared once, in the first code cell. Run as a script, give them on
# the command line (`--help` lists them):
#
#     python analysis/notebooks/01_fit_sweep.py --sweep runs/x --n-boot 50
#
# or, in Jupyter, papermill or a script, in the environment (`SCALELAB_NB_<NAME>`, one
# prefix for every notebook):
#
#     SCALELAB_NB_SWEEP=runs/x jupyter lab
#
# else the defaults written there apply (`analysis.plots.notebook_params`).

# %% tags=["parameters"]
from analysis.plots.notebook_params import parameters

SWEEP, N_BOOT = parameters(
    SWEEP="",  # a collected sweep directory; empty: a synthetic runs table
    N_BOOT=200,  # bootstrap resamples per fit (CIs of E, R_D*, R_N*)
)

# %%
from pathlib import Path

import polars as pl

from analysis import fit_data_constrained, prepare_runs
from analysis.errors import AnalysisInputError
from analysis.plots.curves import plot_norm_trajectories, plot_training_curves
from analysis.plots.notebook_figures import show
from analysis.plots.plots import plot_loss_vs_epochs, plot_loss_vs_x, plot_residuals
from analysis.recipes.recipe_asymptote import recipe_laws
from analysis.synthetic.runs import synthetic_runs
from analysis.tables.layout import RUNS_FILE, runs_file
from analysis.tables.records_scan import scan_records

if SWEEP:
    sweep = Path(SWEEP)
    if not runs_file(sweep).is_file():
        raise SystemExit(f"{sweep}/{RUNS_FILE} is missing: run `scalelab collect {sweep}` first")
    runs = pl.read_parquet(runs_file(sweep))
    source = f"sweep {sweep}"
else:
    sweep = None
    runs = synthetic_runs(seed=0)
    source = "SYNTHETIC runs table (no SWEEP given)"
print(f"source: {source}; {runs.height} runs")

# %% [markdown]
# ## The runs table in a few lines of polars

# %%
print(runs.group_by("state").len().sort("state"))
print(
    runs.filter(pl.col("state") == "COMPLETED")
    .group_by("D_unique", "epochs")
    .agg(pl.len().alias("runs"), pl.col("final_loss").min().alias("best_final_loss"))
    .sort("D_unique", "epochs")
)

# %% [markdown]
# ## Training curves and per-layer norm trajectories
#
# One lazy scan over `<sweep>/runs/*/evals.parquet` (and `evals/part-*.parquet` of
# unfinished runs), joined to the runs table for N and the recipe.

# %%
if sweep is not None:
    evals = scan_records(sweep, "evals").collect()
    print(f"{evals.height} eval rows from {evals['run_id'].n_unique()} runs")
    if evals.height:
        show(plot_training_curves(evals, runs), "training_curves")
    norms = scan_records(sweep, "norms")
    logged = norms.select(pl.col("run_id").unique()).collect()["run_id"].to_list()
    if logged:
        largest = runs.filter(pl.col("run_id").is_in(logged)).sort("N")["run_id"][-1]
        norms_one = norms.filter(pl.col("run_id") == largest).collect()
        show(plot_norm_trajectories(norms_one, largest), "norm_trajectories")
        show(plot_norm_trajectories(norms_one, largest, kind="update"), "update_norms")
    else:
        print("no norms recorded: train with train.norms_every > 0 to get per-layer norm trajectories")
else:
    print("synthetic runs table: no training curves or norms to show")

# %% [markdown]
# ## Fit-ready rows (diverged and incomplete runs excluded, with a note each)

# %%
table = prepare_runs(runs, loss="final_loss")
for note in table.notes:
    print("note:", note)
data = table.data
print(data.select("N", "D", "U", "loss").describe())

# %% [markdown]
# ## Loss vs N per recipe and budget: L = A / x^B + E, x = N / 1e6
#
# Each recipe (`analysis.recipes.rows`: extra.recipe, Kim's tuned blocks, else one per
# block; a table without recipes: each D) at each unique-token budget U gets Kim et al.'s
# law on each size's best cell, by the report's engine (`recipe_asymptote.recipe_laws`):
# E with its t interval, flagged on 4 sizes (one residual dof), or the reason it is not
# written. The same E, interval and reason as `scalelab report` and `scalelab compare`.

# %%
laws, source = recipe_laws(data)
print(f"recipes from {source}")
rows = []
for i, law in enumerate(laws):
    res = law.asymptote
    said = f"E = {res.E:.4f} ({res.lo:.4f}, {res.hi:.4f})" if not res.why_not else "E not identified"
    show(plot_loss_vs_x(law.runs, title=f"{law.label}: loss vs N, {said}"), f"loss_vs_N_{i}")
    if res.why_not:
        print(f"{law.label}: {res.why_not}")
        rows.append({"group": law.label, "E": None, "E_lo": None, "E_hi": None, "sizes": res.n})
        continue
    flag = f" ({res.flag})" if res.flag else ""
    print(f"{law.label}: E = {res.E:.4f}, 95% CI ({res.lo:.4f}, {res.hi:.4f}){flag}")
    rows.append({"group": law.label, "E": res.E, "E_lo": res.lo, "E_hi": res.hi, "sizes": res.n})
print(pl.DataFrame(rows) if rows else "no recipe with runs")

# %% [markdown]
# ## Muennighoff's data-constrained law, two stages
#
# Stage 1 fits the base Chinchilla law on single-epoch runs with N <= N_opt(U); stage 2
# freezes it and fits R_D* and R_N* on every run. A sweep without enough single-epoch
# runs gets a line saying what is missing instead.

# %%
try:
    dc = fit_data_constrained(data, warn=False)
except AnalysisInputError as err:
    dc = None
    print(f"data-constrained law not fitted: {err}")
if dc is not None:
    print("stage 1:", dc.base.summary() if dc.base is not None else "given")
    print("stage 2:", dc.summary())
    dc_boot = dc.bootstrap(N_BOOT, seed=0)
    print("R_D* 95% CI:", dc_boot.ci()["R_D"], " R_N* 95% CI:", dc_boot.ci()["R_N"])
    if sweep is None:
        print("synthetic truth: R_D* = 15.39, R_N* = 5.31 (Muennighoff et al.)")
    show(plot_loss_vs_epochs(data, dc), "loss_vs_epochs")
    show(plot_residuals(data, dc), "residuals")
