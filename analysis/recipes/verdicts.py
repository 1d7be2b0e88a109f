"""Which recipe wins at infinite compute, by at least how much: one rule for identified
asymptotes and for recipes that overfit.

Kim, Kotha, Liang, Hashimoto 2025 ("Pre-training under infinite compute", arXiv 2509.14786)
compare recipes by the asymptote E of L(N) = A / N^B + E. A recipe whose loss *rises* with N
(the standard recipe overfits at a fixed data budget) has no asymptote: what it achieved is
its best observed loss. Each recipe's level is a ``RecipeLevel``:

* an identified asymptote: E with its CI (lo, hi) and SE;
* or, for a recipe whose loss rises with N (``rises_with_n``), its best observed loss with
  its noise sigma (the SD of that loss: from replicate seeds when there are any,
  ``replicates.replicate_sigma``, else the residual scatter around a smooth curve,
  ``replicates.scatter_sigma``).

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

The lines (``verdict_lines``, ``pair_verdict``). Which recipe is better at infinite
compute: one line per pair of recipes, answered where the data decide it, by the rule above. ``scalelab report``,
``scalelab demo`` and ``scalelab compare`` print these lines, built here from the same inputs, so on one sweep they
print the same verdict.

Each recipe's level at infinite compute (``level_of``, from the runs of its best cell per
size, ``cells.best_cells``) is
- its asymptote E with its 95% CI, when E may be written (``recipe_asymptote``: why_not
  None); or
- its **best observed loss**, when its loss rises with N (it overfits: no asymptote exists,
  and the best it reached is what it achieves; ``rises_with_n`` decides, in numbers).
  Its noise sigma is the SD of one run's loss from the sweep's replicate seeds
  (``replicates.find_replicates``: seeds of one cell, ensemble members), else the scatter of
  the recipe's own points around a quadratic in log N (``replicates.scatter_sigma``, which errs
  large); divided by sqrt(m) for a mean of m seeds (``level_rule``).

Two asymptotes are compared by the paired bootstrap CI of E_A - E_B (``compare_recipes``,
over the runs of the best cell per size, its seeds included); an asymptote against a best
observed loss by the asymptote's upper end against best - 2 sigma. "No verdict" comes only
with the numbers that stop it. The ensembles' K -> inf limits are judged against each
recipe by ``ensemble_lines``.

Ensembles. Ensembles against the recipes at infinite compute, under the one verdict rule
(the rule above).

Kim et al. 2025 ("Pre-training under infinite compute", arXiv 2509.14786, sec. 4) take an
ensemble's loss to its K -> inf limit (A/K + C over members K, per model size N) and those
limits to N -> inf (A/N^B + C): the joint (N, K -> inf) asymptote. The ensemble's level here:

* the joint (N, K -> inf) asymptote with its 95% CI, when it may be written
  (``infinite_compute.reportable``: enough sizes with an identified K -> inf limit, a finite
  interval, identified);
* else each size's K -> inf limit C with its 95% CI from its K law, one level per size
  whose K law may be written. A limit at one N is what more members buy at that size, not
  what larger models would: it is an upper bound on the joint asymptote only if the loss
  falls with N, so a verdict from it says which size it rests on.

Against a recipe's asymptote the two are not paired (the ensemble's limit comes from the
members of one or a few sizes; the recipe's from its own sizes and seeds), so the rule's
paired Delta E does not apply: a winner only when the intervals separate, X = B.lo - A.hi > 0
(``recipe_verdict(..., paired=False)``), else "no verdict" with how much they overlap.
Against an overfitting recipe, its best observed loss - 2 sigma as always.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable, Mapping
from dataclasses import dataclass

import numpy as np
import polars as pl

from analysis.errors import AnalysisInputError
from analysis.recipes.cells import size_points
from analysis.recipes.compare import compare_recipes
from analysis.recipes.extrapolation import count_label
from analysis.recipes.infinite_compute import RecipeAnalysis, reportable
from analysis.recipes.names import JOINT, NOT_RECIPES
from analysis.recipes.recipe_asymptote import RecipeE, recipe_asymptote
from analysis.recipes.replicates import Replicates, scatter_sigma

__all__ = [
    "N_BOOT",
    "RULE",
    "RecipeLevel",
    "Rise",
    "Verdict",
    "Z",
    "ensemble_levels",
    "ensemble_lines",
    "level_of",
    "level_rule",
    "pair_line",
    "pair_verdict",
    "recipe_level",
    "recipe_verdict",
    "rises_with_n",
    "verdict_lines",
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
    flag: str = ""  # asymptote: what it rests on when that is little (identified.one_dof_flag)

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
        at = f" at N = {count_label(self.at_n)}" if np.isfinite(self.at_n) else ""
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
    for w, loser in ((a, b), (b, a)):
        x = loser.lo - w.hi
        if x > 0:
            return Verdict(a.name, b.name, w.name, loser.name, x, "upper end vs lower end",
                           f"{w._upper()} lies {x:.3g} below {loser._lower()}", level)
    # no verdict: report the pair whose ends come closest to separating
    w, loser = (a, b) if a.value <= b.value else (b, a)
    gap = loser.lo - w.hi
    if not loser.identified:
        reason = (f"{w._upper()} is within {loser._z_sigma()} of {loser.name}'s best "
                  f"{loser.value:.4g} (they overlap by {-gap:.3g} nats)")
    else:
        reason = (f"{w._upper()} does not lie below {loser._lower()} (they overlap by "
                  f"{-gap:.3g} nats)")
    return Verdict(a.name, b.name, None, None, float("nan"), "upper end vs lower end", reason,
                   level)


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
        line = f"the loss is lowest at the largest size (N = {count_label(last_n)}: {last:.4g})"
        return Rise(False, best, best_n, last, last_n, float(sigma), line)
    rises = rise > z * sigma
    head = (f"the loss at N = {count_label(float(n[j]))} ({float(y[j]):.4g}) exceeds the best "
            f"({best:.4g} at N = {count_label(best_n)}) by {rise:.3g} nats")
    line = (f"{head}, more than {z:g} sigma ({z * sigma:.2g}): it rises with N" if rises else
            f"{head}, within {z:g} sigma ({z * sigma:.2g}): no rise")
    return Rise(bool(rises), best, best_n, last, last_n, float(sigma), line)


def level_rule(name: str, *, E: float, lo: float, hi: float, se: float, why_not: str | None,
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


# ----------------------------------------------------------------------------- lines

RULE = ("an identified asymptote with its 95% CI, or for a recipe whose loss rises with N its "
        "best observed loss +- 2 sigma; two asymptotes by the paired bootstrap CI of E_A - E_B; "
        "an ensemble's K -> inf limit against a recipe by their intervals (unpaired); "
        "a winner only when the ends separate")
"""How the verdict lines decide, in one sentence (the demo's and the report's heading)."""

N_BOOT = 1000
"""Paired resamples per comparison (``scalelab compare``'s default --n-boot)."""
def level_of(name: str, rows: pl.DataFrame, replicates: Replicates, *,
             level: float = 0.95, asym: RecipeE | None = None) -> RecipeLevel | str:
    """The level at infinite compute of the recipe whose best cell per size has the runs
    ``rows`` (N, loss; one row per seed), or why it has none (module docstring). ``asym``:
    the fit of those rows already made (``recipe_asymptote`` at ``level``), else fitted here."""
    pts = size_points(rows, 1.0)  # x = N here: the fit below rescales itself
    if asym is None:
        asym = recipe_asymptote(size_points(rows), level)
    if asym.why_not is None:
        return RecipeLevel.asymptote(name, asym.E, asym.lo, asym.hi, asym.fit.se["E"],
                                     flag=asym.flag)
    if replicates.found:
        sigma, source = replicates.sigma, replicates.source()
    else:
        try:
            sigma = scatter_sigma(pts.x, pts.y)
        except AnalysisInputError as err:
            return f"{name} vs N {asym.why_not}; no noise estimate for its best loss ({err})"
        source = f"scatter of its {pts.n} sizes"
    nan = float("nan")
    return level_rule(name, E=nan, lo=nan, hi=nan, se=nan, why_not=asym.why_not, n=pts.x,
                      loss=pts.y, sigma=sigma, sigma_from=source, m=pts.m)


def pair_line(la: RecipeLevel | str, lb: RecipeLevel | str, a: str, b: str,
              delta_ci: Callable[[], tuple[float, float]]) -> str:
    """The verdict line of recipes ``a`` and ``b`` with levels ``la``, ``lb``;
    ``delta_ci()``: the paired CI of E_a - E_b, asked for only when both are asymptotes.
    Where the paired bootstrap cannot run (fewer than ``MIN_SIZES`` shared sizes: its
    resamples would interpolate), two asymptotes are judged by their own intervals, a
    winner only when they separate (conservative: it ignores that they share sizes)."""
    stops = [v for v in (la, lb) if isinstance(v, str)]
    if stops:
        return f"{a} vs {b}: no verdict ({'; '.join(stops)})"
    delta, paired, why_unpaired = None, True, ""
    if la.identified and lb.identified:
        try:
            delta = delta_ci()
        except AnalysisInputError as err:
            paired, why_unpaired = False, f"{err}: judged by the two intervals alone"
    line = recipe_verdict(la, lb, delta_ci=delta, paired=paired).line()
    notes = [why_unpaired] if why_unpaired else []
    notes += [f"E_{v.name} {v.flag}" for v in (la, lb) if v.flag]
    return line + "".join(f" [{n}]" for n in notes)


def pair_verdict(rows_a: pl.DataFrame, rows_b: pl.DataFrame, a: str, b: str,
                 replicates: Replicates, *, level: float = 0.95, n_boot: int = N_BOOT,
                 seed: int = 0, resample: str = "sizes+seeds",
                 asymptotes: tuple[RecipeE, RecipeE] | None = None):
    """(the verdict line of recipes ``a`` and ``b``, the paired bootstrap or None where the
    rule did not need it) from each recipe's best-cell runs (N, loss, seed): what ``scalelab
    compare`` and ``scalelab next`` print, by the report's rule (``level_of``, ``pair_line``).
    ``asymptotes``: the two recipes' fits already made at ``level``, else each is fitted
    here once, for its level and the paired bootstrap's start alike."""
    boot: list = []
    known = asymptotes or tuple(recipe_asymptote(size_points(r), level) for r in (rows_a, rows_b))

    def delta_ci() -> tuple[float, float]:
        boot.append(compare_recipes(rows_a, rows_b, names=(a, b), n_boot=n_boot, level=level,
                                    seed=seed, resample=resample, asymptotes=known))
        return boot[-1].ci

    la, lb = (level_of(name, rows, replicates, level=level, asym=asym)
              for name, rows, asym in ((a, rows_a, known[0]), (b, rows_b, known[1])))
    return pair_line(la, lb, a, b, delta_ci), (boot[-1] if boot else None)


def _rows(res: RecipeAnalysis, recipe: str) -> pl.DataFrame:
    """The recipe's best-cell runs, else (a fitted re-estimate, not runs) its points."""
    if recipe in res.cell_rows:
        return res.cell_rows[recipe]
    return res.best_per_n.filter(pl.col("recipe") == recipe).select("N", "loss").sort("N")


def recipe_level(res: RecipeAnalysis, recipe: str) -> RecipeLevel | str:
    """The recipe's level at infinite compute, or why it has none (``level_of`` on its
    best-cell runs with the sweep's replicate sigma, from the analysis' own fit of them)."""
    return level_of(recipe, _rows(res, recipe), res.replicates, asym=res.judged.get(recipe))


def verdict_lines(res: RecipeAnalysis, *, seed: int = 0) -> list[str]:
    """One line per pair of recipes (module docstring), then the ensembles' lines."""
    names = [r for r in res.fits if r not in NOT_RECIPES and _rows(res, r).height]
    levels = {r: recipe_level(res, r) for r in names}
    lines = []
    for a, b in itertools.combinations(names, 2):
        def delta(a=a, b=b) -> tuple[float, float]:
            return compare_recipes(_rows(res, a), _rows(res, b), names=(a, b), n_boot=N_BOOT,
                                   asymptotes=(res.judged.get(a), res.judged.get(b)),
                                   seed=seed).ci
        lines.append(pair_line(levels[a], levels[b], a, b, delta))
    return lines + ensemble_lines(res, levels)


# ----------------------------------------------------------------------------- ensembles

def ensemble_levels(res: RecipeAnalysis) -> tuple[list[RecipeLevel], str]:
    """The ensemble's levels (module docstring) and which is used, in words."""
    k_sizes = len(res.k_fits) and sum(reportable(f, "values of K") is None
                                      for f in res.k_fits.values())
    joint = res.fits.get(JOINT)
    why = reportable(joint, "sizes", None if joint is not None else k_sizes)
    if why is None:
        lo, hi = joint.ci()
        return ([RecipeLevel.asymptote(JOINT, joint.E, lo, hi, joint.se["E"])],
                "the joint (N, K -> inf) asymptote")
    levels = []
    for n, fit in sorted(res.k_fits.items()):
        if reportable(fit, "values of K") is None:
            lo, hi = fit.ci()
            levels.append(RecipeLevel.asymptote(f"ensemble K->inf at N={count_label(n)}", fit.E,
                                                lo, hi, fit.se["E"]))
    return levels, (f"each size's K -> inf limit from its K law; no joint (N, K -> inf) "
                    f"asymptote: {why}")


def ensemble_lines(res: RecipeAnalysis, levels: Mapping[str, RecipeLevel | str]) -> list[str]:
    """One line per ensemble level and recipe (module docstring); none without ensemble
    evals. ``levels``: each recipe's level or why it has none (``recipe_level``)."""
    if not res.ensemble.height:
        return []
    ens, used = ensemble_levels(res)
    if not ens:
        return [f"ensembles vs recipes: no verdict (no ensemble level: {used})"]
    lines = []
    for e in ens:
        for name, level in levels.items():
            if isinstance(level, str):
                lines.append(f"{e.name} vs {name}: no verdict ({level})")
                continue
            v = recipe_verdict(e, level, paired=False)
            lines.append(f"{v.line()}; {e.name}: {e.describe()}, {name}: {level.describe()} "
                         f"(ensemble level: {used})")
    return lines
