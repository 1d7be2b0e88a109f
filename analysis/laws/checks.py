"""Refuse garbage before fitting: each check raises a one-line AnalysisInputError.

- a column with missing, non-finite or non-positive values: the message counts the rows,
  names the first few (0-based row indices) and points to ``analysis.tables.runs.prepare_runs``,
  which drops such runs with a note;
- fewer than ``MIN_POINTS`` = 3 points (a curve through 1 or 2 points determines nothing),
  or fewer than free parameters + 1 (``require_points``: the law would interpolate);
- a constant loss: there is no trend to fit;
- a constant input column (all N equal, all D equal, ...): the law cannot see the
  dependence it models. U (unique tokens, DataConstrained) may be constant: a sweep over
  epochs at one data budget is a valid design;
- per-point weights that are not finite, negative, of the wrong length or all zero.

Points with weight 0 do not count as points.
"""

from __future__ import annotations

from typing import Any, Protocol

import numpy as np

from analysis.errors import AnalysisInputError, TooFewPointsError

__all__ = [
    "MIN_POINTS",
    "NamedColumns",
    "bad_values_error",
    "check_fit_data",
    "checked_values",
    "column_array",
    "point_weights",
    "require_points",
]

MIN_POINTS = 3


class NamedColumns(Protocol):
    """What ``check_fit_data`` reads of a law (``analysis.laws.laws.Law`` has both): its
    name and its input columns. A protocol here, because laws.py imports this module."""

    @property
    def name(self) -> str: ...

    @property
    def columns(self) -> tuple[str, ...]: ...

_SHOW_ROWS = 5  # row indices named in a bad-values message
_MAY_BE_CONSTANT = frozenset({"U"})


def require_points(n: int, n_free: int, law: str, what: str = "points") -> None:
    """Refuse an underdetermined fit: ``n`` points for ``n_free`` free parameters need
    ``n >= max(MIN_POINTS, n_free + 1)`` (with fewer the law interpolates: zero residuals,
    zero-width CIs). Raises TooFewPointsError naming the count."""
    need = max(MIN_POINTS, n_free + 1)
    if n < need:
        raise TooFewPointsError(n, n_free, law, what, need=need)


def bad_values_error(name: str, values: np.ndarray, ok: np.ndarray) -> AnalysisInputError:
    """The error for column ``name`` whose rows with ``ok`` False are unusable."""
    bad = np.flatnonzero(~ok)
    rows = ", ".join(str(i) for i in bad[:_SHOW_ROWS]) + (", ..." if bad.size > _SHOW_ROWS else "")
    shown = ", ".join(f"{v:g}" for v in values[bad[:3]])
    return AnalysisInputError(
        f"column '{name}' has {bad.size} of {values.size} rows missing, non-finite or <= 0 "
        f"(rows {rows}: {shown}); drop them first, e.g. with analysis.tables.runs.prepare_runs"
    )


def column_array(data: Any, name: str, *, positive: bool = True) -> np.ndarray:
    """Column ``name`` of a polars DataFrame or mapping as float64 (n,), checked finite
    (and > 0 when ``positive``); missing column or bad rows: AnalysisInputError."""
    try:
        col = data[name]
    except Exception:  # noqa: BLE001 (polars raises ColumnNotFoundError, a mapping KeyError)
        have = list(getattr(data, "columns", None) or list(data))
        raise AnalysisInputError(f"the data need a '{name}' column; they have {have}") from None
    return checked_values(name, col.to_numpy() if hasattr(col, "to_numpy") else col, positive)


def checked_values(name: str, values: Any, positive: bool = True) -> np.ndarray:
    """``values`` of column ``name`` as float64 (n,) (None -> NaN), checked finite (and > 0
    when ``positive``); AnalysisInputError naming the bad rows otherwise."""
    arr = np.atleast_1d(np.asarray(values, dtype=float))
    if arr.ndim != 1 or arr.size == 0:
        raise AnalysisInputError(f"column '{name}' must be one-dimensional with at least one row")
    ok = np.isfinite(arr) & (arr > 0) if positive else np.isfinite(arr)
    if not ok.all():
        raise bad_values_error(name, arr, ok)
    return arr


def point_weights(data: Any, weights: Any, n: int) -> np.ndarray | None:
    """Per-point weights (n,) from an array or a column name; None stays None."""
    if weights is None:
        return None
    if isinstance(weights, str):
        w = column_array(data, weights, positive=False)
    else:
        w = np.asarray(weights, dtype=float).reshape(-1)
    if w.size != n:
        raise AnalysisInputError(f"weights: {w.size} values for {n} points")
    if not np.all(np.isfinite(w)) or np.any(w < 0) or not np.any(w > 0):
        raise AnalysisInputError("weights must be finite, >= 0 and not all 0")
    return w


def check_fit_data(
    law: NamedColumns, X: dict[str, np.ndarray], y: np.ndarray, n_free: int, w: np.ndarray | None
) -> None:
    """Refuse a fit its data cannot support (see the module docstring)."""
    if n_free == 0:  # everything fixed: the fit only evaluates the objective
        return
    used = np.ones(y.size, dtype=bool) if w is None else w > 0
    require_points(int(used.sum()), n_free, law.name)
    if np.ptp(y[used]) == 0:
        raise AnalysisInputError(
            f"the loss is constant ({y[used][0]:g} at all {used.sum()} points): nothing to fit"
        )
    for c in law.columns:
        if c not in _MAY_BE_CONSTANT and np.ptp(X[c][used]) == 0:
            raise AnalysisInputError(
                f"all {c} are equal ({X[c][used][0]:g} at {used.sum()} points): {law.name} "
                f"cannot fit its dependence on {c}"
            )
