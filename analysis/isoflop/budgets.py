"""The points of an isoFLOP fit: read from a table, checked, and grouped by compute budget.

Compute: the ``compute`` column when the table has one; otherwise C = 6 N D (the usual
training-FLOP estimate of a dense transformer, Kaplan et al. 2020, arXiv 2001.08361,
sec. 2.1; Hoffmann et al. 2022, arXiv 2203.15556, sec. 3).

Budgets (``group_budgets``):

- ``budgets=None``: single linkage in log C. Sort the points by C; consecutive points
  whose C differ by at most a factor ``1 + rtol`` are one budget. A designed sweep (every
  run of a budget at exactly its C) gives one budget per distinct C, as long as distinct
  budgets are more than a factor ``1 + rtol`` apart. Points read off a figure scatter
  around their nominal C and form one budget per cluster.
- ``budgets=[...]``: each point joins the listed budget nearest in log C when it lies
  within a factor ``1 + rtol`` of it; the others are left out (counted in a note).

A budget's compute is the geometric mean of its points' C (their C when all are equal;
its listed value when given),
and its FLOPs per parameter per token ``k`` the median of C / (N D) over its points
(k = 6 when C = 6 N D; 6 when the table has no D column).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import polars as pl

from analysis.errors import AnalysisInputError, did_you_mean

__all__ = ["DERIVED_RTOL", "FLOPS_PER_PARAM_TOKEN", "Budgets", "group_budgets", "read_points"]

FLOPS_PER_PARAM_TOKEN = 6.0
"""C = 6 N D (Kaplan et al. 2020, sec. 2.1)."""

DERIVED_RTOL = 0.15
"""``fit_isoflops``'s grouping tolerance when C = 6 N D is derived (no compute column):
neighbours in log C within a factor 1.15 are one budget. Real N and D are not the
nominal sizes a sweep planned (parameter counts of a depth/width grid, tokens rounded to
whole batches), so 6 N D scatters by several percent around each planned budget and a
5% tolerance splits one budget into many. Planned budgets are typically a factor >= 2
apart (Hoffmann et al. 2022 Fig. 3: 6e18, 1e19, 3e19, ...; Porian et al. 2024: factors
of 2 to 4), far above 1.15, so distinct budgets stay apart."""


@dataclass(frozen=True, eq=False)
class Budgets:
    """Points grouped by compute budget. Per point (n,): ``C``, ``N``, ``D`` (NaN where the
    table has no D column), ``loss``, ``label`` (the budget's index, -1 for a point in no
    budget). Per budget (K,), sorted by compute: ``C_budget``, ``k`` (C / (N D))."""

    C: np.ndarray
    N: np.ndarray
    D: np.ndarray
    loss: np.ndarray
    label: np.ndarray
    C_budget: np.ndarray
    k: np.ndarray
    notes: tuple[str, ...]


def _column(data: pl.DataFrame, name: str, role: str) -> np.ndarray:
    if name not in data.columns:
        raise AnalysisInputError(
            f"isoFLOP fit: no {role} column '{name}'{did_you_mean(name, data.columns)}; "
            f"the table has {sorted(data.columns)}"
        )
    try:
        return data[name].cast(pl.Float64).to_numpy().astype(float)
    except pl.exceptions.PolarsError:
        raise AnalysisInputError(
            f"isoFLOP fit: column '{name}' is {data[name].dtype}, not numeric"
        ) from None


def read_points(
    data: pl.DataFrame, *, compute: str, N: str, D: str, loss: str
) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """(C, N, D, loss) as float arrays. C = 6 N D when ``compute`` is not a column; D is
    NaN when ``D`` is not a column but ``compute`` is. Every value used must be finite
    and positive: a bad row is refused, never dropped silently."""
    if not isinstance(data, pl.DataFrame):
        raise AnalysisInputError(
            f"isoFLOP fit: expected a polars DataFrame, got {type(data).__name__}"
        )
    if data.height == 0:
        raise AnalysisInputError("isoFLOP fit: the table has no rows")
    has_c, has_d = compute in data.columns, D in data.columns
    if not has_c and not has_d:
        raise AnalysisInputError(
            f"isoFLOP fit: needs a compute column '{compute}' or a token column '{D}' "
            f"(C = 6 N D); the table has {sorted(data.columns)}"
        )
    n_arr, l_arr = _column(data, N, "parameter"), _column(data, loss, "loss")
    d_arr = _column(data, D, "token") if has_d else np.full(data.height, np.nan)
    c_arr = _column(data, compute, "compute") if has_c else FLOPS_PER_PARAM_TOKEN * n_arr * d_arr
    used = {
        N: n_arr,
        loss: l_arr,
        **({D: d_arr} if has_d else {}),
        **({compute: c_arr} if has_c else {}),
    }
    bad = np.zeros(data.height, dtype=bool)
    for values in used.values():
        bad |= ~np.isfinite(values) | (values <= 0)
    if bad.any():
        rows = np.flatnonzero(bad)
        shown = ", ".join(str(r) for r in rows[:5]) + (", ..." if rows.size > 5 else "")
        raise AnalysisInputError(
            f"isoFLOP fit: {rows.size} row(s) with a missing, non-finite or non-positive "
            f"{', '.join(used)} (rows {shown}); drop them first (analysis.prepare_runs does "
            "for a runs table)"
        )
    return c_arr, n_arr, d_arr, l_arr


def _linkage(C: np.ndarray, log_c: np.ndarray, gap: float) -> tuple[np.ndarray, np.ndarray]:
    """Labels and compute of the single-linkage budgets (a gap > ``gap`` in log C splits)."""
    order = np.argsort(log_c, kind="stable")
    starts = np.concatenate([[0], np.cumsum(np.diff(log_c[order]) > gap)])
    label = np.empty(log_c.size, dtype=int)
    label[order] = starts
    C_budget = np.empty(int(starts[-1]) + 1)
    for j in range(C_budget.size):
        same = C[label == j]  # one exact C is kept as it is (no exp-log round trip)
        C_budget[j] = same[0] if np.all(same == same[0]) else np.exp(log_c[label == j].mean())
    return label, C_budget


def _nearest(log_c: np.ndarray, budgets: Sequence[float], gap: float):
    try:
        listed = np.asarray(budgets, dtype=float)
    except (TypeError, ValueError):
        listed = np.array([np.nan])
    if listed.ndim != 1 or listed.size == 0 or not np.all(np.isfinite(listed) & (listed > 0)):
        raise AnalysisInputError(f"isoFLOP fit: budgets must be positive numbers, got {budgets!r}")
    values = np.unique(listed)
    if values.size < listed.size:
        raise AnalysisInputError("isoFLOP fit: budgets lists the same compute twice")
    dist = np.abs(log_c[:, None] - np.log(values)[None, :])
    label = dist.argmin(axis=1)
    label[dist.min(axis=1) > gap] = -1
    return label, values


def group_budgets(
    C: np.ndarray,
    N: np.ndarray,
    D: np.ndarray,
    loss: np.ndarray,
    *,
    budgets: Sequence[float] | None = None,
    rtol: float = 0.05,
) -> Budgets:
    """Group the points by compute budget (the rule in the module docstring)."""
    if not (np.isfinite(rtol) and rtol > 0):
        raise AnalysisInputError(f"isoFLOP fit: rtol must be > 0, got {rtol}")
    log_c, gap = np.log(C), float(np.log1p(rtol))
    if budgets is None:
        label, C_budget = _linkage(C, log_c, gap)
    else:
        label, C_budget = _nearest(log_c, budgets, gap)
    notes = []
    left_out = int(np.sum(label < 0))
    if left_out:
        notes.append(
            f"{left_out} point(s) farther than a factor {1 + rtol:g} from every listed budget "
            "were left out"
        )
    k = np.full(C_budget.size, FLOPS_PER_PARAM_TOKEN)
    if np.isfinite(D).all():  # a D column: the budget's own FLOPs per parameter per token
        for j in np.unique(label[label >= 0]):
            k[j] = float(np.median(C[label == j] / (N[label == j] * D[label == j])))
    return Budgets(C, N, D, loss, label, C_budget, k, tuple(notes))
