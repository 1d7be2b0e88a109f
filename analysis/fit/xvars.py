"""The x variable of a fit (``scalelab fit --x``) and the law that reads it.

    N  parameters                  runs table ``N``
    D  total training tokens       runs table ``D_total`` (as column ``D``)
    U  unique tokens               runs table ``D_unique`` (as column ``U``)
    C  training compute, FLOPs     runs table ``flops`` (as column ``C``)
    K  ensemble members            ``<sweep>/ensembles/evals.parquet`` (``scalelab
                                   ensemble``): its logit-averaging rows, ``members`` as K

A power law L = A/x^alpha + E takes any of them. Chinchilla reads (N, D) and the
data-constrained law (N, D, U): they take no x.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import polars as pl

from analysis.errors import AnalysisInputError, did_you_mean
from analysis.fit.fit import FitResult
from analysis.laws.laws import LAW_NAMES, PowerLaw, get_law
from analysis.tables.runs import FitTable, prepare_runs

__all__ = [
    "ENSEMBLE_METHOD",
    "X_SOURCES",
    "X_VARIABLES",
    "Fitter",
    "ensemble_points",
    "fit_ready",
    "law_fitter",
    "with_x_columns",
]

X_VARIABLES: dict[str, str] = {
    "N": "parameters (N)",
    "D": "total training tokens (D_total)",
    "U": "unique tokens (D_unique)",
    "C": "training compute in FLOPs (flops)",
    "K": "ensemble members (ensembles/evals.parquet)",
}
X_SOURCES: dict[str, str] = {"D": "D_total", "U": "D_unique", "C": "flops"}
"""x column -> the runs-table column it is read from (N is N)."""
ENSEMBLE_METHOD = "logits"
"""The ensemble rows a K fit uses: logit averaging (Kim et al. 2025)."""


@dataclass(frozen=True)
class Fitter:
    """How to fit one group: the law's name, its x column, the fit itself, and the number
    of free parameters a group must exceed (None: the fit checks its own stages)."""

    law: str
    x: str
    fit: Callable[[pl.DataFrame], FitResult]
    n_free: int | None


def law_fitter(law: str, x: str | None = None) -> Fitter:
    """The Fitter for ``law`` (a name in LAW_NAMES) over ``x`` (powerlaw only; default N)."""
    from analysis.fit.constrained import fit_data_constrained
    from analysis.fit.fit import fit_law

    key = str(law).strip().lower().replace("-", "_")
    get_law(key)  # an unknown law: one line with a did-you-mean
    if x is not None and x not in X_VARIABLES:
        raise AnalysisInputError(
            f"--x must be one of {list(X_VARIABLES)}, got '{x}'{did_you_mean(x, X_VARIABLES)}"
        )
    if key == "powerlaw":
        powerlaw = PowerLaw(x=x or "N")
        return Fitter(key, powerlaw.x, lambda d: fit_law(powerlaw, d), powerlaw.n_params)
    if x is not None:
        reads = ", ".join(LAW_NAMES[key]().columns)
        raise AnalysisInputError(f"--x applies to powerlaw only; {key} reads {reads}")
    if key == "chinchilla":
        return Fitter(key, "N", lambda d: fit_law(key, d), get_law(key).n_params)
    return Fitter(key, "N", fit_data_constrained, None)


def with_x_columns(runs: pl.DataFrame) -> pl.DataFrame:
    """``runs`` plus the x columns D, U, C read from D_total, D_unique, flops (an existing
    column of that name is kept), so --where and --group-by can name them too."""
    add = {
        x: pl.col(src)
        for x, src in X_SOURCES.items()
        if x not in runs.columns and src in runs.columns
    }
    return runs.with_columns(**add) if add else runs


def ensemble_points(ensembles: pl.DataFrame) -> pl.DataFrame:
    """The ensemble table's logit-averaging rows, with K = ``members`` (one row per group
    of members and K; columns of the table kept, so --where/--group-by can use them)."""
    need = {"members", "method", "loss"}
    if not need <= set(ensembles.columns):
        raise AnalysisInputError(
            f"the ensembles table needs columns {sorted(need)}; it has {ensembles.columns}"
        )
    rows = ensembles.filter(pl.col("method") == ENSEMBLE_METHOD)
    if rows.height == 0:
        raise AnalysisInputError(f"the ensembles table has no '{ENSEMBLE_METHOD}' rows")
    return rows.with_columns(pl.col("members").alias("K"))


def fit_ready(table: pl.DataFrame, x: str, *, loss: str = "final_loss") -> FitTable:
    """The rows of ``table`` a fit over ``x`` can use (``prepare_runs`` for a runs table;
    finite, positive K and loss for an ensemble table), with one note per exclusion."""
    if x == "K":
        data = table.with_columns(pl.col("K", "loss").cast(pl.Float64))
        good = pl.all_horizontal(
            [pl.col(c).is_finite() & (pl.col(c) > 0) for c in ("K", "loss")]
        ).fill_null(False)
        bad = data.filter(~good).height
        notes = (f"excluded {bad} row(s) with a missing or non-positive K or loss",) if bad else ()
        return FitTable(data=data.filter(good), notes=notes, n_input=table.height)
    prepared = prepare_runs(with_x_columns(table), loss=loss)
    if x not in ("N", "D", "U"):
        if x not in prepared.data.columns:
            src = X_SOURCES.get(x, x)
            raise AnalysisInputError(f"x = {x} needs runs-table column '{src}'; it is missing")
        col = pl.col(x).cast(pl.Float64)
        good = (col.is_finite() & (col > 0)).fill_null(False)
        data = prepared.data.with_columns(col)
        bad = data.filter(~good).height
        note = (f"excluded {bad} run(s) with a missing or non-positive {x}",) if bad else ()
        return FitTable(data.filter(good), prepared.notes + note, prepared.n_input)
    return prepared
