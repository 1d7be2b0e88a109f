"""Two-stage DataConstrained fit (Muennighoff et al. 2023, arXiv 2305.16264, Section 5).

Stage 1 fits the base Chinchilla law on the runs where the data-constrained law reduces
to it: one epoch or less (D <= U, so D' = D) and no excess parameters (N <= N_opt(U),
so N' = N). N_opt depends on the base law itself, so the stage alternates: fit on the
single-epoch runs, drop those with N > N_opt(U) under that fit, refit, until the set of
runs stops changing (at most ``max_rounds``). Stage 2 freezes the base parameters and
fits only R_D* and R_N* on all runs. A base law may also be given directly (e.g.
Muennighoff's published C4 constants). The first stage-1 round searches the full start
grid; later rounds start from the previous round's optimum.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import replace
from typing import Any

import polars as pl

from analysis.errors import AnalysisInputError
from analysis.fit import FitResult, fit_law
from analysis.laws import Chinchilla, DataConstrained

__all__ = ["BASE_NAMES", "fit_data_constrained"]

BASE_NAMES = ("A", "B", "E", "alpha", "beta")


def _base_rows(data: pl.DataFrame, base: Mapping[str, float] | None) -> pl.DataFrame:
    rows = data.filter(pl.col("D") <= pl.col("U") * (1 + 1e-9))
    if base is not None:
        n_opt = DataConstrained().n_opt(base, rows["U"].to_numpy())
        rows = rows.filter(pl.Series(rows["N"].to_numpy() <= n_opt * (1 + 1e-9)))
    return rows


def fit_data_constrained(
    data: pl.DataFrame,
    *,
    base: FitResult | Mapping[str, float] | None = None,
    loss: str = "huber",
    delta: float = 1e-3,
    max_rounds: int = 5,
    **fit_options: Any,
) -> FitResult:
    """Two-stage fit; returns the stage-2 FitResult (its ``base`` holds the stage-1 fit
    when one was run). ``fit_options`` pass to both stages' ``fit_law``."""
    for c in ("N", "D", "U", "loss"):
        if c not in data.columns:
            raise AnalysisInputError(
                f"data_constrained needs column '{c}'; the data has {data.columns}"
            )
    base_fit: FitResult | None = None
    if isinstance(base, FitResult):
        base_fit, base_params = base, dict(base.params)
    elif base is not None:
        base_params = {k: float(base[k]) for k in BASE_NAMES}
    else:
        chosen: pl.DataFrame | None = None
        current: Mapping[str, float] | None = None
        for _ in range(max_rounds):
            rows = _base_rows(data, current)
            if rows.height < len(BASE_NAMES) + 1:  # fit_law's rule: free parameters + 1
                raise AnalysisInputError(
                    f"stage 1 needs >= {len(BASE_NAMES) + 1} runs with one epoch or less and "
                    f"N <= N_opt(U); found {rows.height}"
                )
            if chosen is not None and rows.height == chosen.height and rows.equals(chosen):
                break
            chosen = rows
            # Round 1 searches the full grid; later rounds refit a subset of the same runs
            # and start from the previous optimum.
            starts = fit_options.get("starts", "grid") if current is None else current
            opts = {k: v for k, v in fit_options.items() if k != "starts"}
            base_fit = fit_law(Chinchilla(), rows, loss=loss, delta=delta, starts=starts, **opts)
            current = base_fit.params
        base_params = dict(current)  # type: ignore[arg-type]
    fixed = {k: base_params[k] for k in BASE_NAMES}
    result = fit_law(DataConstrained(), data, loss=loss, delta=delta, fixed=fixed, **fit_options)
    return replace(result, base=base_fit)
