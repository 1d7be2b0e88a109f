"""Which recipe wins at infinite compute, by at least how much: one rule for identified
asymptotes and for recipes that overfit.

Kim, Kotha, Liang, Hashimoto 2025 ("Pre-training under infinite compute", arXiv 2509.14786)
compare recipes by the asymptote E of L(N) = A / N^B + E. A recipe whose loss *rises* with N
(the standard recipe overfits at a fixed data budget) has no asymptote: what it achieved is
its best observed loss. Each recipe's level is a ``RecipeLevel``:

* an identified asymptote: E with its CI (lo, hi) and SE;
* or, for a recipe whose loss rises with N (``rises_with_n``), its best observed loss with
  its noise sigma (the SD of that loss: from replicate seeds when there are any,
  ``replicate_sigma``, else the residual scatter around a smooth curve, ``scatter_sigma``).

The rule (``recipe_verdict``). Each level has a range it is taken to lie in at 95%:

* asymptote: its CI (lo, hi);
* best observed: best -/+ 2 sigma. Its lower end best - 2 sigma is what the comparison uses
  against it. The best observed loss is an optimistic estimate of the level the recipe can
  reach (it is the minimum over sizes of noisy losses), so measuring the winner's margin from
  best - 2 sigma is conservative.

A beats B at infinite compute by at least X nats when X = (B's lower end) - (A's upper end) > 0,
e.g. X = (B_best - 2 sigma_B) - A_hi for an identified A against an overfitting B. For two
identified asymptotes the two CIs are not independent (the same sizes, often the same seeds),
so the rule takes the *paired* CI of Delta E = E_A - E_B (``analysis.recipes.compare``'s
paired bootstrap, ``RecipeComparison``): A wins by at least -hi when hi < 0, B by at least lo
when lo > 0. Otherwise: no verdict, with the reason in numbers.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from analysis import AnalysisInputError
from analysis.recipes.extrapolation import count_label as _count

__all__ = [
    "RecipeLevel",
    "Rise",
    "Verdict",
    "Z",
    "recipe_level",
    "recipe_verdict",
    "replicate_sigma",
    "rises_with_n",
    "run_sigma",
    "scatter_sigma",
]

Z = 2.0
"""Sigmas a best observed loss is taken to lie within (about 95% for Gaussian noise)."""


@dataclass(frozen=True)
class RecipeLevel:
    """A recipe's loss at infinite compute: an identified asymptote or its best observed loss."""

    name: str
    kind: str  # "asymptote" or "best observed"
    value: float  # E, or the best observed loss
    lo: float  # asymptote: CI lower end; best observed: value - Z sigma
    hi: float  # asymptote: CI upper end; best observed: value + Z sigma
    se: float = float("nan")  # asymptote: the SE of E
    sigma: float = float("nan")  # best observed: the SD of the best loss
    at_n: float = float("nan")  # best observed: the size N (parameters) it was observed at
    sigma_from: str = ""  # best observed: where sigma comes from, in words
    flag: str = ""  # asymptote: what it rests on when that is little (kim_law.one_dof_flag)

    @classmethod
    def asymptote(cls, name: str, E: float, lo: float, hi: float,
                  se: float = float("nan"), flag: str | None = None) -> RecipeLevel:
        """An identified asymptote E with its (95%) CI (lo, hi); ``flag``: said beside it."""
        if not (np.isfinite(E) and np.isfinite(lo) and np.isfinite(hi) and lo <= E <= hi):
            raise AnalysisInputError(f"{name}: an asymptote needs finite lo <= E <= hi, got "
                                     f"E = {E}, CI ({lo}, {hi})")
        return cls(name=name, kind="asymptote", value=float(E), lo=float(lo), hi=float(hi),
                   se=float(se), flag=flag or "")

    @classmethod
    def best_observed(cls, name: str, best: float, sigma: float, *, at_n: float = float("nan"),
                      sigma_from: str = "") -> RecipeLevel:
        """A recipe whose loss rises with N: its best observed loss ``best`` (at ``at_n``)
        with the SD ``sigma`` of that loss (of the seed mean, if ``best`` is a mean)."""
        if not (np.isfinite(best) and np.isfinite(sigma) and sigma >= 0):
            raise AnalysisInputError(f"{name}: a best observed loss needs finite best and "
                                     f"sigma >= 0, got {best}, {sigma}")
        return cls(name=name, kind="best observed", value=float(best),
                   lo=float(best - Z * sigma), hi=float(best + Z * sigma), sigma=float(sigma),
                   at_n=float(at_n), sigma_from=sigma_from)

    @property
    def identified(self) -> bool:
        return self.kind == "asymptote"

    def describe(self) -> str:
        """e.g. "E = 1.987 (95% CI 1.947-2.027)" or "best 2.209 at N = 80k (sigma 0.015)"."""
        if self.identified:
            flag = f"; {self.flag}" if self.flag else ""
            return f"E = {self.value:.4g} (CI {self.lo:.4g}-{self.hi:.4g}{flag})"
        at = f" at N = {_count(self.at_n)}" if np.isfinite(self.at_n) else ""
        src = f", {self.sigma_from}" if self.sigma_from else ""
        return f"best observed {self.value:.4g}{at} (sigma {self.sigma:.2g}{src})"

    def _z_sigma(self) -> str:
        """'2 sigma (0.042)', with where sigma comes from when that is known."""
        src = f"; sigma {self.sigma:.2g} {self.sigma_from}" if self.sigma_from else ""
        return f"{Z:g} sigma ({Z * self.sigma:.2g}{src})"

    def _lower(self) -> str:
        """How the lower end reads in a sentence."""
        if self.identified:
            return f"{self.name}'s CI lower end {self.lo:.4g}"
        return f"{self.name}'s best {self.value:.4g} minus {self._z_sigma()} = {self.lo:.4g}"

    def _upper(self) -> str:
        if self.identified:
            return f"{self.name}'s upper end {self.hi:.4g}"
        return f"{self.name}'s best {self.value:.4g} plus {self._z_sigma()} = {self.hi:.4g}"


@dataclass(frozen=True)
class Verdict:
    """Which of two recipes is lower at infinite compute, by at least ``margin`` nats."""

    a: str
    b: str
    winner: str | None  # None: no verdict
    loser: str | None
    margin: float  # the winner's least margin X, nats (nan when no verdict)
    method: str  # "paired Delta E" or "upper end vs lower end"
    reason: str  # the numbers behind the verdict, or why there is none
    level: float = 0.95

    @property
    def answered(self) -> bool:
        return self.winner is not None

    def line(self) -> str:
        pct = f"{100 * self.level:g}%"
        if self.answered:
            return (f"{self.winner} beats {self.loser} at infinite compute by at least "
                    f"{self.margin:.3g} nats ({pct}): {self.reason}")
        return f"{self.a} vs {self.b}: no verdict: {self.reason}"


def recipe_verdict(a: RecipeLevel, b: RecipeLevel, *,
                   delta_ci: tuple[float, float] | None = None, paired: bool = True,
                   level: float = 0.95) -> Verdict:
    """The verdict between recipes ``a`` and ``b`` (module docstring).

    ``delta_ci``: the paired CI (lo, hi) of E_a - E_b, required when both are identified
    asymptotes (``compare_recipes(...)``'s Delta E; never re-estimated here).
    ``paired=False``: two asymptotes that share no sizes to pair over (an ensemble's K -> inf
    limit against a recipe's N -> inf asymptote) are judged by their intervals alone: a
    winner only when they separate (upper end below the other's lower end)."""
    if a.identified and b.identified and paired:
        if delta_ci is None:
            raise AnalysisInputError(
                f"{a.name} and {b.name} both have identified asymptotes: pass the paired CI of "
                f"E_{a.name} - E_{b.name} (delta_ci, from compare_recipes); their separate CIs "
                f"ignore that they share sizes and seeds")
        lo, hi = (float(v) for v in delta_ci)
        if not (np.isfinite(lo) and np.isfinite(hi) and lo <= hi):
            raise AnalysisInputError(f"delta_ci must be finite with lo <= hi, got {delta_ci}")
        ci = f"E_{a.name} - E_{b.name} = {a.value - b.value:+.4g}, paired CI ({lo:+.4g}, {hi:+.4g})"
        if hi < 0:
            return Verdict(a.name, b.name, a.name, b.name, -hi, "paired Delta E",
                           f"{ci} lies below 0", level)
        if lo > 0:
            return Verdict(a.name, b.name, b.name, a.name, lo, "paired Delta E",
                           f"{ci} lies above 0", level)
        return Verdict(a.name, b.name, None, None, float("nan"), "paired Delta E",
                       f"{ci} contains 0", level)
    for w, l in ((a, b), (b, a)):
        x = l.lo - w.hi
        if x > 0:
            return Verdict(a.name, b.name, w.name, l.name, x, "upper end vs lower end",
                           f"{w._upper()} lies {x:.3g} below {l._lower()}", level)
    # no verdict: report the pair whose ends come closest to separating
    w, l = (a, b) if a.value <= b.value else (b, a)
    gap = l.lo - w.hi
    if not l.identified:
        reason = (f"{w._upper()} is within {l._z_sigma()} of {l.name}'s best "
                  f"{l.value:.4g} (they overlap by {-gap:.3g} nats)")
    else:
        reason = (f"{w._upper()} does not lie below {l._lower()} (they overlap by "
                  f"{-gap:.3g} nats)")
    return Verdict(a.name, b.name, None, None, float("nan"), "upper end vs lower end", reason,
                   level)


# ----------------------------------------------------------------------------- noise

def replicate_sigma(groups: Sequence[Sequence[float]]) -> float:
    """Pooled within-size SD of one run's loss from replicate seeds: groups of losses, one
    group per size (or per any setting the seeds share). sqrt(SUM_g SUM_i (y_gi - ybar_g)^2 /
    SUM_g (m_g - 1)); groups of one seed carry no information. The SD of a mean of m seeds is
    this / sqrt(m)."""
    ss, dof = 0.0, 0
    for g in groups:
        v = np.asarray(g, dtype=float)
        if v.size >= 2:
            ss += float(np.sum((v - v.mean()) ** 2))
            dof += v.size - 1
    if dof == 0:
        raise AnalysisInputError("replicate_sigma needs a size with >= 2 seeds")
    return float(np.sqrt(ss / dof))


def scatter_sigma(n, loss) -> float:
    """SD of one loss from the scatter around a smooth curve when there are no replicate
    seeds: the residual SD of a quadratic in log N (it follows a U-shaped curve, which a power
    law does not), sqrt(SSE / (n - 3)); needs >= 4 sizes. It also absorbs any misfit of the
    quadratic, so it errs large (a conservative verdict)."""
    n = np.asarray(n, dtype=float)
    y = np.asarray(loss, dtype=float)
    if n.size < 4 or np.unique(n).size < 3:
        raise AnalysisInputError(f"scatter_sigma needs >= 4 points at >= 3 sizes, got {n.size}")
    t = np.log(n)
    X = np.stack([np.ones_like(t), t - t.mean(), (t - t.mean()) ** 2], axis=1)  # (n, 3)
    coef, *_ = np.linalg.lstsq(X, y, rcond=None)
    return float(np.sqrt(np.sum((y - X @ coef) ** 2) / (n.size - 3)))


@dataclass(frozen=True)
class Rise:
    """Whether a recipe's loss rises with N (it overfits). True in a boolean context when it
    does; ``line`` says so in numbers either way."""

    rises: bool
    best: float  # the lowest loss
    best_n: float  # at this N
    last: float  # the loss at the largest N
    last_n: float
    sigma: float
    line: str

    def __bool__(self) -> bool:
        return self.rises


def rises_with_n(n, loss, sigma: float, *, z: float = Z) -> Rise:
    """Does the loss at some N larger than the best's exceed the best loss by more than z sigma?

    The highest point after the best is compared (a loss that went up and came partly back
    down, as noisy overfitting curves do, still rose). Taking the highest of several noisy
    points makes a flat tail read as a rise more often than a single point would (about 5%
    for one point); a recipe taken for overfitting is compared by its best observed loss
    minus 2 sigma, which errs in its favour.

    n (m,) sizes, loss (m,) the loss at each (seed means averaged per size first if there are
    several; ``sigma`` is then the SD of such a mean); the threshold z sigma (z = 2) is on
    the rise itself."""
    n = np.asarray(n, dtype=float)
    y = np.asarray(loss, dtype=float)
    if n.ndim != 1 or n.shape != y.shape or n.size < 2:
        raise AnalysisInputError(f"n and loss must be 1-D of one length >= 2, got {n.shape}, "
                                 f"{y.shape}")
    if not (np.isfinite(sigma) and sigma >= 0):
        raise AnalysisInputError(f"sigma must be finite and >= 0, got {sigma}")
    sizes = np.unique(n)
    if sizes.size != n.size:  # average the points per size
        y = np.array([y[n == s].mean() for s in sizes])
        n = sizes
    order = np.argsort(n)
    n, y = n[order], y[order]
    i = int(np.argmin(y))
    best, best_n, last, last_n = float(y[i]), float(n[i]), float(y[-1]), float(n[-1])
    j = i + 1 + int(np.argmax(y[i + 1:])) if i < n.size - 1 else i  # the highest point after the best
    rise = float(y[j]) - best
    if i == n.size - 1:
        line = f"the loss is lowest at the largest size (N = {_count(last_n)}: {last:.4g})"
        return Rise(False, best, best_n, last, last_n, float(sigma), line)
    rises = rise > z * sigma
    head = (f"the loss at N = {_count(float(n[j]))} ({float(y[j]):.4g}) exceeds the best "
            f"({best:.4g} at N = {_count(best_n)}) by {rise:.3g} nats")
    line = (f"{head}, more than {z:g} sigma ({z * sigma:.2g}): it rises with N" if rises else
            f"{head}, within {z:g} sigma ({z * sigma:.2g}): no rise")
    return Rise(bool(rises), best, best_n, last, last_n, float(sigma), line)


def recipe_level(name: str, *, E: float, lo: float, hi: float, se: float, why_not: str | None,
                 n, loss, sigma: float, sigma_from: str, m=None) -> RecipeLevel | str:
    """A recipe's level at infinite compute: its asymptote (E, CI lo-hi) when it may be
    written (``why_not`` None); else, when its loss rises with N (``rises_with_n`` on its
    points n, loss), its best observed loss; else the reason it has neither, in numbers.

    ``sigma`` is the SD of one run's loss; ``m`` (per point, default 1) the seeds each point
    is the mean of. The best observed loss, a mean of m_best seeds, has SD sigma/sqrt(m_best);
    the rise is judged with sigma/sqrt(min m), the largest SD of any point (it errs towards
    "no rise")."""
    if why_not is None:
        return RecipeLevel.asymptote(name, E, lo, hi, se)
    n = np.asarray(n, dtype=float)
    m = np.ones_like(n) if m is None else np.asarray(m, dtype=float)
    if m.shape != n.shape or not np.all(m >= 1):
        raise AnalysisInputError(f"m must hold one seed count >= 1 per point, got {m}")
    rise = rises_with_n(n, loss, sigma / np.sqrt(m.min()))
    if not rise:
        return (f"{name} vs N {why_not}; nor is it held to its best observed loss: its loss "
                f"does not rise with N past its best by more than {Z:g} sigma ({rise.line})")
    m_best = float(m[n == rise.best_n].min())
    return RecipeLevel.best_observed(name, rise.best, sigma / np.sqrt(m_best), at_n=rise.best_n,
                                     sigma_from=sigma_from if m_best == 1 else
                                     f"{sigma_from}, / sqrt({m_best:g}) for its {m_best:g}-seed mean")


def run_sigma(rows) -> tuple[float, str]:
    """The SD of one run's loss from ``rows`` (N, loss; several seeds per N where a sweep
    has them): pooled over replicate seeds when some N has >= 2, else the scatter of the
    per-N means around a quadratic in log N; and where it comes from, in words."""
    import polars as pl

    groups = [g["loss"].to_list() for _, g in rows.group_by("N")]
    if any(len(g) >= 2 for g in groups):
        seeds = sum(len(g) for g in groups if len(g) >= 2)
        return replicate_sigma(groups), f"from {seeds} replicate seeds"
    means = rows.group_by("N").agg(pl.col("loss").mean()).sort("N")
    return scatter_sigma(means["N"], means["loss"]), f"scatter of its {means.height} sizes"
