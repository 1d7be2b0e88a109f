"""How far a two-stage data-constrained fit's R_D*, R_N* move when its base law moves.

Muennighoff et al. 2023 (arXiv 2305.16264, Section 5) fit the base law
L = E + A/N^alpha + B/D^beta first, freeze it, then fit only R_D* and R_N*. Stage 2's own
profile and SEs are conditional on that base: they say nothing about a base the stage-1 runs
leave loose. On their public 182 C4 runs the 29 single-epoch runs pin the base so weakly
that the conditional fit moves R_D* from 15 to 225 and R_N* from 5 to 2,400 with the base
(docs/fit_diagnostics.md), while each conditional profile looks tight.

This module measures that dependence directly. The stage-1 runs are resampled with
replacement ``n`` times (a case bootstrap, Efron & Tibshirani 1993, ch. 6); each resample's
base law is refitted from the stage-1 optimum and stage 2 is refitted on all runs with that
base frozen, from the stage-2 optimum. The 2.5-97.5% range of each constant over the
resamples is the part of its uncertainty that comes from stage 1. A constant whose range
spans more than a decade (``saturation_identified.FLAT_DECADE``, the rule a flat profile is
judged by), or whose refits reach its box bound, is not identified by these data whatever
stage 2's conditional profile says. Pure numpy/scipy via ``fit_law``; 2 warm-started refits
per resample.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np
import polars as pl

from analysis.errors import AnalysisInputError
from analysis.fit.diagnostics import at_bounds
from analysis.fit.fit import FitResult, fit_law
from analysis.fit.saturation_identified import FLAT_DECADE, SATURATION
from analysis.laws.laws import Chinchilla, DataConstrained

__all__ = ["BASE_RESAMPLES", "BaseDependence", "base_dependence"]

BASE_RESAMPLES = 32
"""Default resamples: the 2.5% and 97.5% quantiles are then the 1st and 32nd order statistics
interpolated, enough to tell a decade (x10) apart from a few percent; ~0.15 s each."""


@dataclass(frozen=True)
class BaseDependence:
    """Each constant's range over refits of the base law on resampled stage-1 runs."""

    n: int  # resamples whose two refits both ran
    ranges: dict[str, tuple[float, float]]  # {R_D/R_N: (2.5%, 97.5%)} natural values
    at_bound: dict[str, int]  # {R_D/R_N: resamples whose stage-2 refit ended at a bound}

    def not_identified(self) -> dict[str, str]:
        """{constant: why} for those the base leaves open (module docstring)."""
        out: dict[str, str] = {}
        for p, (lo, hi) in self.ranges.items():
            hits = self.at_bound.get(p, 0)
            spread = hi / lo if lo > 0 else float("inf")
            if spread > FLAT_DECADE or hits:
                extra = f"; {hits} of {self.n} refits end at its bound" if hits else ""
                out[p] = (f"it depends on the stage-1 base law: refitting the base on {self.n} "
                          f"resamples of its runs moves {p}* over {lo:.3g} to {hi:.3g} "
                          f"(95%){extra}")
        return out


def base_dependence(data: pl.DataFrame, stage1_rows: pl.DataFrame, base: FitResult,
                    fit: FitResult, *, n: int = BASE_RESAMPLES, seed: int = 0,
                    tie1: Mapping[str, str] | None = None, tie2: Mapping[str, str] | None = None,
                    options: Mapping[str, Any] | None = None) -> BaseDependence:
    """Resample ``stage1_rows`` (the runs ``base`` was fitted on) ``n`` times, refit base and
    stage 2 (``fit``, on ``data``) from their optima; ``options`` are fit_law's (loss,
    delta, weights, space, ...; ``starts`` is replaced by the optima)."""
    if n < 2:
        raise AnalysisInputError(f"base_resamples must be >= 2 (or 0 to skip), got {n}")
    opts = {k: v for k, v in dict(options or {}).items() if k not in ("starts", "warn")}
    names = [p for p in SATURATION if p in fit.free]
    start2 = {p: fit.params[p] for p in names}
    rng = np.random.default_rng(seed)
    m = stage1_rows.height
    values: dict[str, list[float]] = {p: [] for p in names}
    hits = dict.fromkeys(names, 0)
    for _ in range(n):
        rows = stage1_rows[rng.integers(0, m, size=m)]
        try:
            b = fit_law(Chinchilla(), rows, starts=dict(base.params), tie=dict(tie1 or {}),
                        warn=False, **opts)
            fixed = {k: b.params[k] for k in ("A", "B", "E", "alpha", "beta")}
            s = fit_law(DataConstrained(), data, fixed=fixed, starts=start2,
                        tie=dict(tie2 or {}), warn=False, **opts)
        except AnalysisInputError:
            continue  # a degenerate resample (too few distinct runs): not a draw of the base
        bounds = at_bounds(s)
        for p in names:
            values[p].append(s.params[p])
            hits[p] += p in bounds
    done = len(values[names[0]]) if names else 0
    ranges = {p: (float(np.quantile(v, 0.025)), float(np.quantile(v, 0.975)))
              for p, v in values.items() if v}
    return BaseDependence(n=done, ranges=ranges, at_bound={p: h for p, h in hits.items() if h})
