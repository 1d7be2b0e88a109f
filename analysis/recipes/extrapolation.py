"""Can a law's extrapolation be trusted? Refit without the largest sizes and predict them.

``holdout_check(x, y, k)`` refits Kim et al.'s law L(x) = A / x^B + E (arXiv 2509.14786;
x = N / 1e6) on all points but the k largest x, predicts the held-out losses and gives each a
prediction interval for a new observation (Seber & Wild 1989, "Nonlinear Regression", §5.1,
the linearised (delta-method) interval):

    var(y0 - Lhat(x0)) = g0 Cov g0' + s^2 / w0,     g0 = dL/d(A, B, E) at x0 (1, 3),
    Cov = s^2 (J'WJ)^-1,  s^2 = SSE / (n - k - 3)   (the refit's; ``power_law``),
    PI = Lhat(x0) -/+ t_{n-k-3, (1+level)/2} sqrt(var).

The interval is for the held-out *observation* (its noise included), so "covered" is the
question "is this observation what the refitted law predicted, within its uncertainty?". On
synthetic studies with known truth (``holdout_coverage``; docs/extrapolation.md) the 95%
intervals cover 94-98% of held-out observations, 200 studies per design
(tests/analysis/test_extrapolation.py asserts 90-98%).

``k`` = 1 needs >= 5 points (a refit on 4 keeps one residual degree of freedom); ``k`` = 2 is
offered only with >= 6 points (AnalysisInputError otherwise). A study with fewer points than
the refit needs gets a HoldoutCheck with no points and ``why`` saying so.
``holdout_largest`` is the same check for any k >= 1 (``scalelab fit --holdout-largest K``;
docs/extrapolation.md): the refit needs n - k >= 4 distinct x (3 without the floor).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from scipy import stats

from analysis import AnalysisInputError
from analysis.fit.power_law import SCALE, fit_kim
from analysis.fit.prediction import HeldOutSummary, count_label

__all__ = ["MIN_POINTS_K2", "MIN_REFIT", "count_label", "Coverage", "HeldOutPoint", "HoldoutCheck", "holdout_check",
           "holdout_coverage", "holdout_largest", "simulate_study"]

MIN_REFIT = 4
"""Points the refit needs: 3 parameters + 1 residual degree of freedom for s^2."""
MIN_POINTS_K2 = 6
"""Holding out the largest two is offered from 6 points on (the refit keeps 4)."""


@dataclass(frozen=True)
class HeldOutPoint:
    """One held-out size, predicted by the law refitted without it."""

    x: float  # the law's variable, count / SCALE
    observed: float  # the held-out loss
    predicted: float  # the refitted law at x
    lo: float  # prediction interval for the observation, lower end
    hi: float  # upper end
    covered: bool  # lo <= observed <= hi

    @property
    def error(self) -> float:
        """observed - predicted, nats (negative: the law was pessimistic)."""
        return self.observed - self.predicted


@dataclass(frozen=True)
class HoldoutCheck(HeldOutSummary):
    """The extrapolation check of one law: refit without the ``k`` largest sizes."""

    k: int  # sizes held out
    level: float  # the prediction intervals' level
    n: int  # distinct sizes in the study
    points: tuple[HeldOutPoint, ...]  # the held-out sizes, ascending x; () when not checked
    refit: tuple[float, float, float]  # (A, B, E) of the refit; nan when not checked
    dof: int  # residual degrees of freedom of the refit, n - k - 3
    why: str = ""  # "" when checked, else why not (in numbers)
    name: str = "N"  # the law's variable, for the line ("N" or "U")
    scale: float = SCALE  # x * scale is the count the line prints

    def line(self) -> str:
        """One line, e.g. 'held out N = 271k: predicted 2.013 (95% PI 1.97-2.05), observed
        1.999, error -0.014 nats, covered'."""
        if not self.checked:
            return f"extrapolation check: {self.why}"
        pct = f"{100 * self.level:g}%"

        def one(p: HeldOutPoint) -> str:
            return (f"predicted {p.predicted:.3f} ({pct} PI {p.lo:.3g}-{p.hi:.3g}), observed "
                    f"{p.observed:.3f}, error {p.error:+.3f} nats, "
                    f"{'covered' if p.covered else 'NOT covered'}")

        if len(self.points) == 1:
            p = self.points[0]
            return f"held out {self.name} = {count_label(p.x * self.scale)}: {one(p)}"
        sizes = ", ".join(count_label(p.x * self.scale) for p in self.points)
        parts = "; ".join(f"{self.name} = {count_label(p.x * self.scale)} {one(p)}"
                          for p in self.points)
        return f"held out the largest {self.k} ({self.name} = {sizes}): {parts}"


def holdout_check(x, y, k: int = 1, level: float = 0.95, *, weights=None, name: str = "N",
                  scale: float = SCALE, polish: bool = True, floor: bool = True) -> HoldoutCheck:
    """Refit A / x^B + E without the ``k`` largest x and predict them (module docstring):
    the report's check, k = 1 or 2 (2 only with >= ``MIN_POINTS_K2`` sizes); any k is
    ``holdout_largest``, which this calls.

    x (n,) the law's variable (N / 1e6), y (n,) losses, ``weights`` (n,) optional per-point
    weights (e.g. seeds averaged per size: a point's variance is s^2 / w). Several points at
    the largest x (seeds not averaged) are held out together as the k largest distinct x.
    ``polish``: polish the refit with fit_law (``power_law.fit_kim``; False: the profiled
    least-squares optimum alone, the same to ~1e-9, for simulations). ``floor``: the law
    A / x^B + E (True) or the pure A / x^B (a data law without a floor: one parameter
    fewer, so one point fewer in the refit)."""
    if k not in (1, 2):
        raise AnalysisInputError(f"holdout k must be 1 or 2 (the largest size or two), got {k}")
    n = int(np.unique(np.asarray(x, dtype=float)).size)
    if k == 2 and n < MIN_POINTS_K2:
        raise AnalysisInputError(
            f"holding out the largest 2 sizes needs >= {MIN_POINTS_K2} sizes, got {n}")
    return holdout_largest(x, y, int(k), level, weights=weights, name=name, scale=scale,
                           polish=polish, floor=floor)


def holdout_largest(x, y, k: int, level: float = 0.95, *, weights=None, name: str = "N",
                    scale: float = SCALE, polish: bool = True,
                    floor: bool = True) -> HoldoutCheck:
    """``holdout_check`` for any ``k`` >= 1 (``scalelab fit --holdout-largest K``): the same
    refit and prediction interval. A refit left with fewer than parameters + 1 distinct x
    gives a HoldoutCheck with no points and ``why`` saying so."""
    if isinstance(k, bool) or not isinstance(k, (int, np.integer)) or k < 1:
        raise AnalysisInputError(f"holdout k must be an integer >= 1, got {k!r}")
    k = int(k)
    x = np.asarray(x, dtype=float)
    y = np.asarray(y, dtype=float)
    w = np.ones_like(x) if weights is None else np.asarray(weights, dtype=float)
    if not 0 < level < 1:
        raise AnalysisInputError(f"level must be in (0, 1), got {level}")
    if x.ndim != 1 or x.shape != y.shape or w.shape != x.shape:
        raise AnalysisInputError(f"x, y and weights must be 1-D of one length, got "
                                 f"{x.shape}, {y.shape}, {w.shape}")
    sizes = np.unique(x)  # ascending
    n = int(sizes.size)
    nan3 = (float("nan"),) * 3
    params = 3 if floor else 2
    least = MIN_REFIT - 3 + params
    if n - k < least:
        return HoldoutCheck(
            k=k, level=level, n=n, points=(), refit=nan3, dof=n - k - params, name=name,
            scale=scale,
            why=(f"{n} sizes: the refit without the largest {k} would have {n - k}, the law "
                 f"needs >= {least} ({params} parameters + 1 residual degree of freedom)"))
    cut = sizes[n - k]  # the smallest held-out size
    keep = x < cut
    fit = fit_kim(x[keep], y[keep], w[keep], floor=floor, polish=polish)
    dof = fit.dof
    if not fit.has_cov:
        return HoldoutCheck(
            k=k, level=level, n=n, points=(), refit=(fit.A, fit.B, fit.E), dof=dof, name=name,
            scale=scale,
            why=(f"the refit on {int(keep.sum())} points is not identified (A = {fit.A:.3g}, "
                 f"B = {fit.B:.3g}, E = {fit.E:.3g}: its Gauss-Newton matrix is singular)"))
    t = float(stats.t.ppf(0.5 + level / 2, dof))
    out = ~keep
    xo, yo, wo = x[out], y[out], w[out]
    pred = fit.predict(xo)
    sd = np.sqrt(fit.mean_var(xo) + fit.s2 / wo)  # (k',)
    pts = tuple(
        HeldOutPoint(x=float(a), observed=float(b), predicted=float(p), lo=float(p - t * s),
                     hi=float(p + t * s), covered=bool(p - t * s <= b <= p + t * s))
        for a, b, p, s in sorted(zip(xo, yo, pred, sd)))
    return HoldoutCheck(k=k, level=level, n=n, points=pts, refit=(fit.A, fit.B, fit.E), dof=dof,
                        name=name, scale=scale)


# ----------------------------------------------------------------------------- coverage

@dataclass(frozen=True)
class Coverage:
    """How often the prediction intervals of ``holdout_check`` cover, over simulated studies."""

    n: int  # sizes per study
    span: float  # largest / smallest x
    k: int  # sizes held out
    sigma: float  # noise SD of a point
    studies: int  # simulated studies
    checked: int  # studies whose refit gave an interval (the others: ``why``)
    points: float  # share of held-out observations inside their interval
    studies_covered: float  # share of checked studies with every held-out point covered
    truth: float  # share of held-out noise-free losses inside the interval
    median_abs_error: float  # median |observed - predicted|, nats
    A_range: tuple[float, float]  # A drawn log-uniform in this range
    B_range: tuple[float, float]  # B drawn uniform in this range

    HEADER = ("| n | span | k | sigma | A | B | checked | points covered | studies all covered "
              "| truth covered | median abs error |\n"
              "|---|---|---|---|---|---|---|---|---|---|---|")

    def row(self) -> str:
        """A markdown table row under ``HEADER``."""
        return (f"| {self.n} | {self.span:g}x | {self.k} | {self.sigma:g} | "
                f"{self.A_range[0]:g}-{self.A_range[1]:g} | "
                f"{self.B_range[0]:g}-{self.B_range[1]:g} | {self.checked}/{self.studies} | "
                f"{100 * self.points:.1f}% | {100 * self.studies_covered:.1f}% | "
                f"{100 * self.truth:.1f}% | {self.median_abs_error:.4f} |")


def simulate_study(rng: np.random.Generator, n: int, span: float, sigma: float, *,
                   x_max: float = 0.271, A_range=(0.003, 1.0), B_range=(0.3, 0.9),
                   E_range=(1.8, 2.2)):
    """One synthetic study: n sizes log-spaced over ``span`` up to ``x_max`` (271k parameters,
    the demo's largest), A log-uniform, B and E uniform in their ranges, Gaussian noise of SD
    ``sigma``. Returns x (n,), observed y (n,), noise-free truth (n,)."""
    x = np.geomspace(x_max / span, x_max, n)
    A = float(np.exp(rng.uniform(np.log(A_range[0]), np.log(A_range[1]))))
    B = float(rng.uniform(*B_range))
    E = float(rng.uniform(*E_range))
    truth = A * x**-B + E
    return x, truth + sigma * rng.standard_normal(n), truth


def holdout_coverage(n: int, span: float, k: int, sigma: float, *, studies: int = 200,
                     seed: int = 0, level: float = 0.95, A_range=(0.003, 1.0),
                     B_range=(0.3, 0.9), polish: bool = True, **study) -> Coverage:
    """Run ``holdout_check`` on ``studies`` synthetic studies (``simulate_study``, seeds
    ``seed`` .. ``seed + studies - 1``) and count how often the intervals cover. ``study``:
    ``simulate_study``'s other keywords (x_max, E_range)."""
    hit = tot = all_hit = truth_hit = checked = 0
    errors = []
    for s in range(seed, seed + studies):
        rng = np.random.default_rng(s)
        x, y, truth = simulate_study(rng, n, span, sigma, A_range=A_range, B_range=B_range,
                                     **study)
        chk = holdout_check(x, y, k=k, level=level, polish=polish)
        if not chk.checked:
            continue
        checked += 1
        all_hit += chk.covered
        for p in chk.points:
            tot += 1
            hit += p.covered
            truth_hit += p.lo <= truth[np.searchsorted(x, p.x)] <= p.hi
            errors.append(abs(p.error))
    nan = float("nan")
    return Coverage(n=n, span=span, k=k, sigma=sigma, studies=studies, checked=checked,
                    points=hit / tot if tot else nan,
                    studies_covered=all_hit / checked if checked else nan,
                    truth=truth_hit / tot if tot else nan,
                    median_abs_error=float(np.median(errors)) if errors else nan,
                    A_range=tuple(A_range), B_range=tuple(B_range))
