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
# # 4. Hyperparameter-transfer laws
#
# A sweep that tries a hyperparameter at several sizes holds its own transfer law:
# each size's optimum from a local quadratic in log hp, then hp* = c · N^a (or
# c · N^a · D^b, or c · C^a) with intervals, checked on a held-out size and against the
# output layer's logged norm (Filatov et al. 2025, arXiv 2510.03871). This is what
# `scalelab transfer` prints; the method and the CPU twin's results are in
# docs/transfer.md.
#
# Set `SWEEP` to a sweep directory and `HP`, `X`, `BEST_OVER` (e.g. `optim.lr` for a
# batch-size law), `WHERE` to the runs to use. Without a sweep, the second half refits
# **synthetic** sweeps whose truth is DeepSeek-AI's published laws (2024, arXiv
# 2401.02954), labelled as such: it shows the method recovering a known law, not
# DeepSeek's data.
#
# **Parameters** are declared once, in the first code cell. Run as a script, give them on
# the command line (`--help` lists them):
#
#     python analysis/notebooks/04_transfer_laws.py --sweep runs/x \
#         --hp train.batch_size --best-over optim.lr --where block=bs --where seed=0
#
# or, in Jupyter, papermill or a script, in the environment (`SCALELAB_NB_<NAME>`, one
# prefix for every notebook):
#
#     SCALELAB_NB_SWEEP=runs/x SCALELAB_NB_WHERE='block=bs;seed=0' jupyter lab
#
# else the defaults written there apply (`analysis.plots.notebook_params`).

# %% tags=["parameters"]
from analysis.plots.notebook_params import parameters

SWEEP, HP, X, BEST_OVER, WHERE, HOLDOUT = parameters(
    SWEEP="",  # a collected sweep directory; empty: the synthetic studies only
    HP="optim.lr",  # any swept numeric column: optim.weight_decay, train.batch_size, ...
    X="N",  # N, "N,D" or C
    BEST_OVER="",  # profile each cell's loss over this column first, e.g. "optim.lr"
    WHERE=[],  # as `scalelab transfer --where` (repeatable; env: ';' between), "block=lr-adamw"
    HOLDOUT=1,  # the largest sizes held out for the out-of-sample check (0: none)
)

# %%
from pathlib import Path

import numpy as np
import polars as pl

from analysis.errors import AnalysisInputError
from analysis.plots.notebook_figures import show
from analysis.plots.transfer import plot_transfer
from analysis.synthetic.transfer import (
    JointTruth,
    TransferTruth,
    synthetic_joint_sweep,
    synthetic_sweep,
)
from analysis.tables.layout import runs_file
from analysis.tables.records_scan import scan_records
from analysis.tables.select import select_runs
from analysis.transfer.holdout import holdout_check
from analysis.transfer.norms import norm_check, output_norms
from analysis.transfer.transfer import fit_transfer


def print_law(fit, title: str) -> None:
    """The law's parameters with their intervals."""
    print(f"{title}: {fit.hp}* = c * " + " * ".join(f"{v}^a_{v}" for v in fit.x)
          + f" over {fit.law.n} groups")
    for name, est, lo, hi in fit.law.params():
        print(f"  {name} = {est:.4g}  ({100 * fit.law.level:g}% CI {lo:.4g} .. {hi:.4g})")


# %% [markdown]
# ## The sweep's law
#
# Refused groups (an optimum at the grid's edge, no valley) are listed with their reason;
# a law needs at least (variables + 2) accepted groups for intervals.

# %%
if SWEEP:
    sweep = Path(SWEEP)
    if not runs_file(sweep).is_file():
        raise SystemExit(f"{runs_file(sweep)} is missing: run `scalelab collect {sweep}` first")
    print(f"source: sweep {sweep}; {HP} against {X}" + (f", where {WHERE}" if WHERE else ""))
    runs = select_runs(pl.read_parquet(runs_file(sweep)), WHERE)
    xs = tuple(X.split(","))
    try:
        fit = fit_transfer(runs, xs, HP, best_over=BEST_OVER or None)
        train, held = (holdout_check(runs, xs, HP, HOLDOUT, full=fit) if HOLDOUT
                       else (fit, []))
    except AnalysisInputError as err:  # too few sizes or values: the reason, not a number
        print(f"no transfer law for {HP} in {X}: {err}")
        fit = None
    if fit is not None:
        for note in fit.notes:
            print("note:", note)
        print(fit.table.select(*fit.x, "best_hp", "hp_opt", "hp_lo", "hp_hi", "why"))
        print_law(fit, "law")
        for h in held:
            print(f"held out {h.label()}: predicted {h.predicted:.4g} ({h.lo:.4g} .. {h.hi:.4g}), "
                  f"observed {h.observed:.4g}: {'covered' if h.covered else 'NOT covered'}")
        records = scan_records(sweep, "norms").collect()
        try:
            check = norm_check(train, output_norms(records)[0])
            print(check.table)
            print("output-layer norm constant across sizes:", check.constant)
        except AnalysisInputError as err:
            print(f"norm check skipped: {err}")
        show(plot_transfer(fit, held, train), "transfer_sweep")
else:
    print("no SWEEP given: only the synthetic studies below")

# %% [markdown]
# ## Synthetic sweeps with DeepSeek-AI's published laws as the truth
#
# Only when no `SWEEP` is given. DeepSeek-AI (2024, arXiv 2401.02954) fitted the optimal
# lr and batch size (in tokens) against compute: η* = 0.3118 · C^-0.125 and
# B* = 0.292 · C^0.327. Here each is the known truth of a synthetic sweep over six
# budgets 1e17 .. 1e20 FLOPs (seven hp values a factor 2 apart per budget, off-centre by
# up to half a step, loss noise 0.003 nats), and `fit_transfer` refits it: the recovered
# constants should match the published ones within their intervals.

# %%
if not SWEEP:
    C = np.geomspace(1e17, 1e20, 6)
    for hp, c, a in (("optim.lr", 0.3118, -0.125), ("train.batch_size", 0.292, 0.327)):
        truth = TransferTruth(c=c, a=(a,))
        runs, _ = synthetic_sweep(truth, C, x=("C",), hp=hp, rng=0)
        fit = fit_transfer(runs, ("C",), hp)
        print_law(fit, f"refit (truth c = {c}, a_C = {a})")
        (_, c_est, c_lo, c_hi), (_, a_est, a_lo, a_hi) = fit.law.params()
        print(f"  truth inside both intervals: {c_lo <= c <= c_hi and a_lo <= a <= a_hi}")
        show(plot_transfer(fit), f"transfer_deepseek_{hp.split('.')[-1]}")

# %% [markdown]
# ## A batch-size law needs the lr tuned per batch
#
# Only when no `SWEEP` is given. The optimal batch exists only with the lr tuned at each
# batch (McCandlish et al. 2018, arXiv 1812.06162). In `synthetic_joint_sweep` the truth
# is B* = 0.5 · N^0.3 and lr* ∝ N^-0.4 · B^0.35; every (N, B) cell tries five lr values a
# factor 2 apart around the square-root guess ∝ B^0.5. `best_over="optim.lr"` profiles
# each cell's loss over its lr values (the bottom of a quadratic in log lr) before the
# batch valley is fitted.

# %%
if not SWEEP:
    truth = JointTruth()
    runs = synthetic_joint_sweep(truth, np.geomspace(5e3, 3e5, 6), lr_points=5, rng=0)
    fit = fit_transfer(runs, ("N",), "train.batch_size", best_over="optim.lr")
    print_law(fit, f"profiled over the lr (truth a_N = {truth.a_b})")
    show(plot_transfer(fit), "transfer_joint_batch")
