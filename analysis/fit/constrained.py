"""Two-stage DataConstrained fit (Muennighoff et al. 2023, arXiv 2305.16264, Section 5).

Stage 1 fits the base Chinchilla law on the runs where the data-constrained law reduces
to it: one epoch or less (D <= U, so D' = D) and no excess parameters (N <= N_opt(U),
so N' = N). N_opt depends on the base law itself, so the stage alternates: fit on the
single-epoch runs, drop those with N > N_opt(U) under that fit, refit, until the set of
runs stops changing (at most ``max_rounds``). Stage 2 freezes the base parameters and
fits only R_D* and R_N* on all runs. A base law may also be given directly (e.g.
Muennighoff's published C4 constants). The first stage-1 round searches the full start
grid; later rounds start from the previous round's optimum.

Muennighoff et al. tie alpha = beta in their C4 base law (0.3527; their base was fitted on
Chinchilla's C4 isoFLOP points, a set apart from the repeated-data runs). Here the base
comes from the data's own single-epoch runs and alpha, beta stay free unless ``tie`` says
``{"beta": "alpha"}``: on synthetic runs with alpha = 0.34, beta = 0.28 (0.5% noise, 35
single-epoch runs) the tied base gave R_N* = 16.6 and 8.9 against a truth of 5.31 in 2 of 3
draws, unflagged, and a 95% rho-test on the same runs rejected the tie in 1 of 3; free
exponents gave 5.38, 3.31 and 4.06 (docs/fit_diagnostics.md).

``stage1`` chooses the runs stage 1 may use before the N <= N_opt(U) rounds:
"one_epoch" (the published rule, the default: D <= U), a number m >= 1 (D <= m U: up
to m epochs; Muennighoff et al. find that up to about 4 epochs of repeated data change
the loss negligibly against fresh data, so m = 4 lets more runs pin the base law at a
small bias), or a polars expression over the data's columns. Options of ``fit_law``
pass to both stages where they mean something there: ``tie`` between base parameters
(e.g. {"beta": "alpha"}) goes to stage 1 only (stage 2 holds them fixed), a tie between
R_D and R_N to stage 2; ``weights`` as a column name follow the runs into each stage (an
array is attached as a column first).

Stage 1 needs at least n_free + ``STAGE1_MARGIN`` runs, n_free the base law's free
coordinates after ``tie`` (5, or 4 with alpha = beta); the margin 1 leaves one residual
degree of freedom, the least with which a residual scale (and a profile threshold,
profile_threshold.py) exists, and is ``fit_law``'s own rule (laws/checks.py). Stage 2 is
checked the same way by ``fit_law``.

Identifiability of every stage reaches the result (``warnings``, ``not_identified``), not
only Python warnings:

- stage 1's own warnings (too few runs per parameter, a flat valley, a bound) are carried
  into the result's ``warnings``, prefixed "stage 1 (base law on n runs)";
- R_D* and R_N* that sit at a bound, have a flat profile (a decade moves the deviance by
  < 2) or a 95% profile interval that runs to the box (fit/saturation_identified.py) are
  listed in ``not_identified``;
- when stage 1 was run here, its runs are resampled ``base_resamples`` times and both
  stages refitted (fit/saturation_identified.py, base_dependence): a constant that moves over more than a decade
  with the base is listed too. Stage 2's profile is conditional on the base and cannot see
  this; on Muennighoff et al.'s own 182 C4 runs it is what decides (docs/fit_diagnostics.md).

Each entry of ``not_identified`` is also named in the warnings (an
``IdentifiabilityWarning`` when ``warn``).
"""

from __future__ import annotations

import warnings as _warnings
from collections.abc import Mapping
from dataclasses import replace
from typing import Any

import numpy as np
import polars as pl

from analysis.errors import AnalysisInputError, IdentifiabilityWarning
from analysis.fit.fit import FitResult, fit_law
from analysis.fit.saturation_identified import (
    BASE_RESAMPLES,
    SATURATION,
    base_dependence,
    not_identified,
)
from analysis.laws.laws import Chinchilla, DataConstrained

__all__ = ["BASE_NAMES", "STAGE1_MARGIN", "fit_data_constrained", "fit_stage1", "stage1_filter",
           "stage1_min_runs"]

STAGE1_MARGIN = 1


def stage1_min_runs(tie: Mapping[str, str] | None = None) -> int:
    """Runs stage 1 needs: the base law's free coordinates after ``tie`` (its ties among
    base parameters) plus ``STAGE1_MARGIN``."""
    tie1, _ = _split_tie(tie)
    return len(BASE_NAMES) - len(tie1) + STAGE1_MARGIN

BASE_NAMES = ("A", "B", "E", "alpha", "beta")


_WEIGHTS = "__fit_weights__"  # the column an array of weights travels in


def stage1_filter(stage1: str | float | pl.Expr) -> pl.Expr:
    """The polars predicate that picks stage-1 candidate runs (see the module docstring)."""
    if isinstance(stage1, pl.Expr):
        return stage1
    if isinstance(stage1, str):
        if stage1 != "one_epoch":
            raise AnalysisInputError(
                f"stage1 must be 'one_epoch', a max number of epochs >= 1 or a polars "
                f"expression; got '{stage1}'"
            )
        epochs = 1.0
    else:
        epochs = float(stage1)
        if not epochs >= 1:
            raise AnalysisInputError(f"stage1: max epochs must be >= 1, got {stage1}")
    return pl.col("D") <= pl.col("U") * (epochs * (1 + 1e-9))


def _base_rows(data: pl.DataFrame, base: Mapping[str, float] | None, keep: pl.Expr) -> pl.DataFrame:
    rows = data.filter(keep)
    if base is not None:
        n_opt = DataConstrained().n_opt(base, rows["U"].to_numpy())
        rows = rows.filter(pl.Series(rows["N"].to_numpy() <= n_opt * (1 + 1e-9)))
    return rows


def _split_tie(tie: Mapping[str, str] | None) -> tuple[dict[str, str], dict[str, str]]:
    """(ties among base parameters: stage 1, the others: stage 2)."""
    tie = dict(tie or {})
    base = {p: t for p, t in tie.items() if p in BASE_NAMES and t in BASE_NAMES}
    return base, {p: t for p, t in tie.items() if p not in base}


def fit_stage1(data: pl.DataFrame, *, stage1: str | float | pl.Expr = "one_epoch",
               tie: Mapping[str, str] | None = None, max_rounds: int = 5,
               **fit_options: Any) -> tuple[FitResult, pl.DataFrame]:
    """Stage 1 (module docstring): the base law fitted on the runs passing ``stage1`` with
    N <= N_opt(U) under the current fit, refitted until that set stops changing (at most
    ``max_rounds``). Returns (the base fit, the runs it was fitted on, with every column of
    ``data``). ``tie``: ties among base parameters; ``fit_options`` pass to ``fit_law``."""
    if max_rounds < 1:
        raise AnalysisInputError(f"max_rounds must be >= 1, got {max_rounds}")
    keep = stage1_filter(stage1)
    tie1, _ = _split_tie(tie)
    need = stage1_min_runs(tie1)
    chosen: pl.DataFrame | None = None
    current: FitResult | None = None
    for _ in range(max_rounds):
        rows = _base_rows(data, None if current is None else current.params, keep)
        if rows.height < need:  # free coordinates after tie + STAGE1_MARGIN
            raise AnalysisInputError(
                f"stage 1 needs >= {need} runs ({need - STAGE1_MARGIN} free base "
                f"parameters + {STAGE1_MARGIN}) passing stage1={stage1!r} "
                f"and N <= N_opt(U); found {rows.height}"
            )
        if chosen is not None and rows.height == chosen.height and rows.equals(chosen):
            break
        chosen = rows
        # Round 1 searches the full grid; later rounds refit a subset of the same runs
        # and start from the previous optimum.
        starts = fit_options.get("starts", "auto") if current is None else current.params
        opts = {k: v for k, v in fit_options.items() if k != "starts"}
        current = fit_law(Chinchilla(), rows, starts=starts, tie=tie1, **opts)
    assert current is not None and chosen is not None
    return current, chosen


def fit_data_constrained(
    data: pl.DataFrame,
    *,
    base: FitResult | Mapping[str, float] | None = None,
    loss: str = "huber",
    delta: float = 1e-3,
    max_rounds: int = 5,
    stage1: str | float | pl.Expr = "one_epoch",
    tie: Mapping[str, str] | None = None,
    weights: np.ndarray | str | None = None,
    base_resamples: int = BASE_RESAMPLES,
    **fit_options: Any,
) -> FitResult:
    """Two-stage fit; returns the stage-2 FitResult (its ``base`` holds the stage-1 fit
    when one was run). ``stage1``, ``tie`` and ``weights``: see the module docstring;
    ``base_resamples``: resamples of the stage-1 runs for the base-dependence check (0
    skips it; it runs only when stage 1 is fitted here); ``fit_options`` (space, seed,
    starts, ...) pass to both stages' ``fit_law``."""
    for c in ("N", "D", "U", "loss"):
        if c not in data.columns:
            raise AnalysisInputError(
                f"data_constrained needs column '{c}'; the data has {data.columns}"
            )
    stage1_filter(stage1)  # a bad stage1 is refused before any fit
    if weights is not None and not isinstance(weights, str):
        w = np.asarray(weights, dtype=float).reshape(-1)
        if w.size != data.height:
            raise AnalysisInputError(f"weights: {w.size} values for {data.height} points")
        data, weights = data.with_columns(pl.Series(_WEIGHTS, w)), _WEIGHTS
    tie1, tie2 = _split_tie(tie)
    fit_options = {**fit_options, "loss": loss, "delta": delta, "weights": weights}
    base_fit: FitResult | None = None
    chosen: pl.DataFrame | None = None
    if isinstance(base, FitResult):
        base_fit, base_params = base, dict(base.params)
    elif base is not None:
        base_params = {k: float(base[k]) for k in BASE_NAMES}
    else:
        base_fit, chosen = fit_stage1(data, stage1=stage1, tie=tie1, max_rounds=max_rounds,
                                      **fit_options)
        base_params = dict(base_fit.params)
    fixed = {k: base_params[k] for k in BASE_NAMES}
    result = fit_law(DataConstrained(), data, fixed=fixed, tie=tie2, **fit_options)
    ni = not_identified(result)
    open_ = [p for p in SATURATION if p in result.free and p not in ni]
    # the base check can only add reasons for constants stage 2 left identified
    if chosen is not None and base_fit is not None and base_resamples and open_:
        dep = base_dependence(data, chosen, base_fit, result, n=base_resamples,
                              seed=int(fit_options.get("seed", 0)), tie1=tie1, tie2=tie2,
                              options=fit_options)
        ni = {**dep.not_identified(), **ni}
    stage1 = () if base_fit is None else tuple(
        f"stage 1 (base law on {base_fit.n_points} runs): {w}" for w in base_fit.warnings)
    msgs = tuple(f"{p} not identified: {why}" for p, why in ni.items())
    if fit_options.get("warn", True):
        for m in msgs:
            _warnings.warn(f"{result.law.name}: {m}", IdentifiabilityWarning, stacklevel=2)
    return replace(result, base=base_fit, not_identified=ni,
                   warnings=stage1 + result.warnings + msgs)
