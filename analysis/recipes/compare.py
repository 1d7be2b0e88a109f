"""Two recipes compared at infinite compute, with a paired bootstrap over sizes and seeds.

Each recipe's runs are a polars frame with one row per finished run:

    N     parameters of the model (> 0)
    loss  its final loss (> 0)
    seed  the seed replicate (optional; rows without it are distinct replicates)

Rows sharing N are seed replicates of that recipe's chosen (tuned) cell at N, e.g. the
runs ``analysis.recipes.infinite_compute`` would pick as a size's best cell, and its seeds. The
law of each recipe is Kim et al.'s (arXiv 2509.14786) L(x) = A / x^B + E with
x = N / ``scale`` (``power_law.SCALE``), fitted by the one engine of this law (``recipe_asymptote``: the
seed mean at x_i weighted by its m_i seeds, the optimum of the fit of every run), so E,
its interval and whether it is identified are the report's and ``next``'s.

The difference of asymptotes Delta = E_A - E_B gets a CI and a two-sided p-value from a
paired bootstrap. ``resample="sizes+seeds"`` (the default) is two-stage (Davison & Hinkley
1997, "Bootstrap Methods and their Application", sec. 3.8, hierarchical data):

1. stage 1, sizes: the k model sizes both recipes ran are drawn k times with replacement;
   the same draw serves both recipes (a size is the pairing unit: whatever is special
   about the model at N, both recipes see it). A draw with fewer than ``min_sizes``
   distinct sizes is drawn again: a resample is a study the analysis would report
   (``identified.MIN_SIZES`` sizes), not a three-point interpolation;
2. stage 2, seeds: for each drawn size, that size's m seed replicates are drawn m times
   with replacement, per recipe; when both recipes ran the same seed labels at N (common
   init and data order) one draw of labels serves both.

Stage 1 carries the law's lack of fit at individual sizes into the interval, which a
fixed-design bootstrap cannot see; with 6-8 sizes it is conservative, because a resample
that loses the largest sizes extrapolates from a shorter range, and stage 2 adds the seed
scatter a second time (Davison & Hinkley's analysis of two-stage resampling). Measured
with 3 seeds at 7 sizes and a well-specified law (tests/analysis/test_compare.py): 100%
coverage of a nominal 95% interval, at twice the width the estimator's spread needs.
``resample="seeds"`` is the fixed-design alternative for a law trusted to fit: every size
kept once, only stage 2, stratified by size (strata: Davison & Hinkley sec. 3.2), on
residuals inflated by sqrt(m/(m - 1)) about each size's seed mean, which undoes the
(m - 1)/m by which resampling m seeds shrinks the variance of their mean (exact for a
mean, to first order for the law). It needs >= 2 seeds at every shared size; the
inflation leaves the least-squares fit unchanged (SUM_ij (f_i - y_ij)^2 =
SUM_i m_i (f_i - ybar_i)^2 + const). Measured: 90% coverage of a nominal 95% interval
at half the default's width (a percentile interval from 3 seeds per stratum runs a
little liberal).

Either way each resample is a vector of counts c (n_runs,) per recipe, and both laws are
refitted on every resample at once: batched Levenberg-Marquardt (``levenberg.lm_batched``)
on the count-weighted objective SUM_i c_i (Lhat_i - L_i)^2 / 2, started at the full-data
fit (as ``bootstrap.bootstrap_fit`` refits), so resamples cost numpy, not scipy loops.
Delta* = E_A* - E_B* per resample; the CI is the percentile interval of Delta*, the
p-value the achieved significance level of the percentile interval,
p = min(1, 2 min(#{Delta* <= 0}, #{Delta* >= 0}) / n_boot): the CI at level 1 - p just
reaches 0 (the achieved significance level of a bootstrap test: Efron & Tibshirani 1993,
"An Introduction to the Bootstrap", ch. 16).

``beats`` names a winner (the lower asymptote) only when the CI excludes 0.

Matched compute: at every shared N (equal N and equal tokens, hence equal 6ND compute,
when both recipes train the same D; a ``flops`` column, where given, is carried into the
table so the caller can see it), the difference of seed-mean losses, mean_A - mean_B,
with a t-interval and p-value: paired t over seed labels where both recipes ran the same
labels at N (common init and data order), else Welch's t. Not bootstrapped: with 2-5
seeds the percentile interval of a mean is too narrow (its variance is (m - 1)/m of the
mean's, and it has few distinct values), while the t-interval is exact for normal seed
scatter. No interval with a single seed on a side (nan, and ``test`` still names it).

Pure numpy/polars; no file I/O.
"""

from __future__ import annotations

import math
import warnings
from dataclasses import dataclass, field, replace

import numpy as np
import polars as pl
from scipy import stats

from analysis.errors import AnalysisInputError
from analysis.fit.bootstrap import check_resamples
from analysis.fit.fit import FitResult, fit_law
from analysis.fit.identified import MIN_SIZES
from analysis.fit.power_law import SCALE
from analysis.laws.laws import PowerLaw
from analysis.recipes.cells import size_points
from analysis.recipes.recipe_asymptote import RecipeE, recipe_asymptote
from analysis.solvers.levenberg import lm_batched

__all__ = ["MIN_SIZES", "SCALE", "SCHEMES", "RecipeComparison", "compare_recipes", "matched_compute",
           "refit_counts"]

MAX_REDRAWS = 1000
"""Redraws of stage 1 before a resample is refused (only reachable with few sizes)."""
SCHEMES = ("sizes+seeds", "seeds")
"""Resampling schemes of ``compare_recipes`` (module docstring)."""


@dataclass(frozen=True)
class RecipeComparison:
    """E_A - E_B with its paired-bootstrap CI and p-value (module docstring)."""

    names: tuple[str, str]
    E: tuple[float, float]
    """Full-data asymptotes (E_A, E_B)."""
    delta: float
    """E_A - E_B (negative: A's asymptote is lower, A is better)."""
    ci: tuple[float, float]
    """Percentile interval of Delta* at ``level``."""
    p_value: float
    level: float
    n_boot: int
    sizes: tuple[float, ...]
    """The shared sizes N (parameters) the comparison rests on."""
    matched: pl.DataFrame
    """Per shared N: N, seeds_a, seeds_b, loss_a, loss_b (seed means), diff (a - b), lo,
    hi, p_value, test ("paired t" / "Welch t"), plus flops_a, flops_b (means) when both
    frames have ``flops``."""
    converged: float
    """Share of the 2 n_boot refits that met the LM tolerance."""
    samples: np.ndarray = field(repr=False)
    """Delta* per resample (n_boot,)."""
    asymptotes: tuple[RecipeE, RecipeE] | None = None
    """Each recipe's E with its interval and why it may not be written
    (``recipe_asymptote``: the report's and next's numbers and judgement)."""

    @property
    def beats(self) -> str | None:
        """"A" or "B" when the CI excludes 0 (the lower asymptote wins), else None."""
        lo, hi = self.ci
        if hi < 0:
            return "A"
        if lo > 0:
            return "B"
        return None

    @property
    def winner(self) -> str | None:
        """The name of the recipe ``beats`` names, or None."""
        return {"A": self.names[0], "B": self.names[1], None: None}[self.beats]

    def _p_text(self) -> str:
        if self.p_value == 0:
            return f"p < {1.0 / self.n_boot:.2g}"
        return f"p = {self.p_value:.2g}" if self.p_value < 0.01 else f"p = {self.p_value:.3f}"

    def stats(self) -> str:
        """'ΔE (A − B) = −0.031, 95% CI (−0.052, −0.011), p = 0.004' (U+2212 minus signs).
        Meaningful as a verdict only when both asymptotes are identified: whether they are
        is ``asymptotes``' judgement, and the verdict is ``verdicts.pair_line``'s."""
        a, b = self.names
        lo, hi = self.ci
        return (f"ΔE ({a} − {b}) = {_signed(self.delta)}, {100 * self.level:g}% CI "
                f"({_signed(lo)}, {_signed(hi)}), {self._p_text()}")

    def line(self) -> str:
        """One sentence, e.g. 'A beats B at infinite compute: ΔE (A − B) = −0.031, 95% CI
        (−0.052, −0.011), p = 0.004' or 'no winner at infinite compute: ...; CI includes 0'
        (typographic minus signs, U+2212). The bootstrap's own reading of Delta E, which
        holds only where both asymptotes are identified; ``scalelab compare`` prints
        ``verdicts.pair_line`` as its verdict."""
        a, b = self.names
        stats = self.stats()
        if self.beats is None:
            return f"no winner at infinite compute: {stats}; CI includes 0"
        win, lose = (a, b) if self.beats == "A" else (b, a)
        return f"{win} beats {lose} at infinite compute: {stats}"


def _signed(v: float) -> str:
    """+0.031 / −0.031 (U+2212), three decimals."""
    return f"{v:+.3f}".replace("-", "\u2212")


def refit_counts(fit: FitResult, counts: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Refit ``fit`` on R count-weighted resamples at once: counts (R, n_points) -> natural
    parameters (R, P) and converged (R,) bool. Batched LM on the fit's own objective
    (Objective.normal_equations with per-row weights), started at the fit's optimum."""
    obj = fit.problem
    z0 = np.repeat(fit.z[None, :], counts.shape[0], axis=0)

    def ne(z, rows):
        return obj.normal_equations(z, weights=counts[rows])

    res = lm_batched(ne, z0, fit.lo, fit.hi, maxiter=200)
    return fit.law.from_internal(obj.full(res.x)), res.converged


@dataclass(frozen=True)
class _Runs:
    """One recipe's runs grouped by size: x (n,), loss (n,), rows per shared size."""

    x: np.ndarray
    loss: np.ndarray
    seeds: list[np.ndarray]  # per shared size: seed labels of its rows (m_i,)
    rows: list[np.ndarray]  # per shared size: row indices into x / loss (m_i,)
    flops: np.ndarray | None


def _read(frame: pl.DataFrame, name: str, shared: np.ndarray, scale: float) -> _Runs:
    frame = frame.filter(pl.col("N").is_in(shared.tolist())).sort("N")
    n = frame["N"].to_numpy().astype(float)
    seed = (frame["seed"].cast(pl.String).to_numpy() if "seed" in frame.columns
            else np.array([f"row{i}" for i in range(frame.height)]))
    rows = [np.flatnonzero(n == s) for s in shared]
    for s, r in zip(shared, rows):
        if len(set(seed[r])) != r.size:
            raise AnalysisInputError(f"{name}: seed labels repeat at N={s:g}; one row per seed")
    flops = frame["flops"].to_numpy().astype(float) if "flops" in frame.columns else None
    return _Runs(n / scale, frame["loss"].to_numpy().astype(float), [seed[r] for r in rows],
                 rows, flops)


def _check(frame: pl.DataFrame, name: str) -> None:
    if missing := {"N", "loss"} - set(frame.columns):
        raise AnalysisInputError(f"{name}: runs need columns N, loss (and seed); missing {sorted(missing)}")
    for col in ("N", "loss"):
        v = frame[col].cast(pl.Float64).to_numpy()
        if not np.all(np.isfinite(v) & (v > 0)):
            raise AnalysisInputError(f"{name}: column {col} must be finite and > 0")


def _fits_shared(known: RecipeE | None, runs: pl.DataFrame, shared: np.ndarray, level: float,
                 scale: float) -> bool:
    """Whether ``known`` is the fit ``compare_recipes`` would make of ``runs`` on the sizes
    ``shared``: made at ``level`` and x = N / SCALE, from runs at exactly those sizes."""
    sizes = np.unique(runs["N"].cast(pl.Float64).to_numpy())
    return (known is not None and known.level == level and scale == SCALE
            and sizes.size == shared.size and bool(np.all(sizes == shared)))


def _fit(r: _Runs, start: RecipeE) -> FitResult:
    """The bootstrap's objective at the engine's optimum (``recipe_asymptote``'s fit)."""
    kw = {}  # no engine optimum to start from (an unfitted recipe): fit_law's own starts
    if start.fit is not None and start.fit.A > 0 and start.fit.E > 0:
        kw["starts"] = [{"A": start.fit.A, "alpha": start.fit.B, "E": start.fit.E}]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return fit_law(PowerLaw(), {"N": r.x, "loss": r.loss}, loss="mse", space="linear",
                       warn=False, **kw)


def _draw_sizes(rng: np.random.Generator, k: int, n_boot: int, min_sizes: int) -> np.ndarray:
    """Stage 1: (n_boot, k) size indices, every row with >= min_sizes distinct values."""
    out = rng.integers(0, k, size=(n_boot, k))
    for _ in range(MAX_REDRAWS):
        bad = np.array([np.unique(r).size < min_sizes for r in out])
        if not bad.any():
            return out
        out[bad] = rng.integers(0, k, size=(int(bad.sum()), k))
    raise AnalysisInputError(f"could not draw resamples with {min_sizes} distinct sizes of {k}")


def _counts(rng: np.random.Generator, sizes: np.ndarray, a: _Runs, b: _Runs,
            n_a: int, n_b: int) -> tuple[np.ndarray, np.ndarray]:
    """Stage 2: per-run counts (n_boot, n_a), (n_boot, n_b) for the stage-1 draws
    ``sizes`` (n_boot, k); seeds drawn jointly where both recipes share their labels."""
    n_boot, k = sizes.shape
    ca, cb = np.zeros((n_boot, n_a)), np.zeros((n_boot, n_b))
    times = np.stack([np.bincount(r, minlength=k) for r in sizes])  # (n_boot, k)
    for i in range(k):
        t = times[:, i]  # how often size i was drawn, per resample
        ra, rb = a.rows[i], b.rows[i]
        paired = sorted(a.seeds[i]) == sorted(b.seeds[i])
        tmax = int(t.max())
        if tmax == 0:
            continue
        # (n_boot, tmax, m) seed draws; occurrence j counts only where j < t.
        use = (np.arange(tmax)[None, :] < t[:, None])[:, :, None]
        da = rng.integers(0, ra.size, size=(n_boot, tmax, ra.size))
        if paired:  # the same labels for B: map A's label order onto B's rows
            order_b = np.array([np.flatnonzero(b.seeds[i] == s)[0] for s in a.seeds[i]])
            db = order_b[da]
        else:
            db = rng.integers(0, rb.size, size=(n_boot, tmax, rb.size))
        for draws, rows, out in ((da, ra, ca), (db, rb, cb)):
            hit = np.zeros((n_boot, rows.size))
            np.add.at(hit, (np.repeat(np.arange(n_boot), draws[0].size), draws.reshape(n_boot, -1).ravel()),
                      np.broadcast_to(use, draws.shape).reshape(n_boot, -1).ravel())
            out[:, rows] += hit
    return ca, cb


def _inflated(fit: FitResult, r: _Runs) -> FitResult:
    """``fit`` with each size's residuals about its seed mean inflated by sqrt(m/(m-1)):
    the same optimum, a new objective for the stratified ("seeds") resampling."""
    y = r.loss.copy()
    for rows in r.rows:
        m = rows.size
        mean = y[rows].mean()
        y[rows] = mean + math.sqrt(m / (m - 1)) * (y[rows] - mean)
    if np.any(y <= 0):
        raise AnalysisInputError("inflated residuals left a loss <= 0; use resample='sizes+seeds'")
    return replace(fit, problem=replace(fit.problem, logy=np.log(y)))


def _pvalue(samples: np.ndarray) -> float:
    """Two-sided achieved significance level of the percentile interval."""
    samples = samples[np.isfinite(samples)]
    below, above = np.mean(samples <= 0), np.mean(samples >= 0)
    return float(min(1.0, 2.0 * min(below, above)))


def _matched(a: _Runs, b: _Runs, shared: np.ndarray, level: float) -> pl.DataFrame:
    """Per shared size: seed means, their difference, its t-interval and p-value (paired
    t where both recipes ran the same seed labels, else Welch's)."""
    rows = []
    for i, n in enumerate(shared):
        la, lb = a.loss[a.rows[i]], b.loss[b.rows[i]]
        lo = hi = p = math.nan
        paired = la.size >= 2 and sorted(a.seeds[i]) == sorted(b.seeds[i])
        if paired:
            order = np.argsort(a.seeds[i]), np.argsort(b.seeds[i])
            test = stats.ttest_rel(la[order[0]], lb[order[1]])
        elif la.size >= 2 and lb.size >= 2:
            test = stats.ttest_ind(la, lb, equal_var=False)
        if paired or (la.size >= 2 and lb.size >= 2):
            with warnings.catch_warnings():  # identical losses: nan interval, said as nan
                warnings.simplefilter("ignore")
                ci = test.confidence_interval(level)
            lo, hi, p = float(ci.low), float(ci.high), float(test.pvalue)
        row = {"N": float(n), "seeds_a": la.size, "seeds_b": lb.size, "loss_a": float(la.mean()),
               "loss_b": float(lb.mean()), "diff": float(la.mean() - lb.mean()), "lo": lo,
               "hi": hi, "p_value": p, "test": "paired t" if paired else "Welch t"}
        if a.flops is not None and b.flops is not None:
            row |= {"flops_a": float(a.flops[a.rows[i]].mean()),
                    "flops_b": float(b.flops[b.rows[i]].mean())}
        rows.append(row)
    return pl.DataFrame(rows)


def matched_compute(runs_a: pl.DataFrame, runs_b: pl.DataFrame, *,
                    names: tuple[str, str] = ("A", "B"), level: float = 0.95) -> pl.DataFrame:
    """The losses at matched compute on every size both recipes ran (``RecipeComparison.
    matched``'s table), whatever the number of shared sizes (empty when none)."""
    _check(runs_a, names[0])
    _check(runs_b, names[1])
    shared = np.intersect1d(runs_a["N"].cast(pl.Float64).unique().to_numpy(),
                            runs_b["N"].cast(pl.Float64).unique().to_numpy())
    if shared.size == 0:
        return pl.DataFrame()
    ra = _read(runs_a.with_columns(pl.col("N").cast(pl.Float64)), names[0], shared, 1.0)
    rb = _read(runs_b.with_columns(pl.col("N").cast(pl.Float64)), names[1], shared, 1.0)
    return _matched(ra, rb, shared, level)


def compare_recipes(runs_a: pl.DataFrame, runs_b: pl.DataFrame, *,
                    names: tuple[str, str] = ("A", "B"), n_boot: int = 1000,
                    level: float = 0.95, seed: int = 0, scale: float = SCALE,
                    min_sizes: int = MIN_SIZES, resample: str = "sizes+seeds",
                    asymptotes: tuple[RecipeE | None, RecipeE | None] | None = None,
                    ) -> RecipeComparison:
    """Compare two recipes' asymptotes E (A/x^B + E, x = N/scale) on the sizes both ran.

    runs_a, runs_b: frames with columns N, loss (and seed, flops) - one row per run.
    Returns a RecipeComparison: Delta = E_A - E_B, its percentile CI and p-value from
    ``n_boot`` paired resamples (``resample``: "sizes+seeds", two-stage, or "seeds",
    stratified by size; module docstring), and the matched-compute table. Needs >=
    ``min_sizes`` shared sizes (and for "seeds" >= 2 seeds per size); raises
    AnalysisInputError otherwise. Deterministic given ``seed``. ``asymptotes``: each recipe's
    fit already made (``recipe_asymptote`` at ``level``, x = N / ``SCALE``), used where it rests
    on exactly the shared sizes instead of fitting those points again."""
    if resample not in SCHEMES:
        raise AnalysisInputError(f"resample must be one of {SCHEMES}, got {resample!r}")
    if not 0 < level < 1:
        raise AnalysisInputError(f"level must be in (0, 1), got {level}")
    if n_boot < 2:
        raise AnalysisInputError(f"n_boot must be >= 2, got {n_boot}")
    check_resamples(n_boot, what="paired bootstrap")
    _check(runs_a, names[0])
    _check(runs_b, names[1])
    shared = np.intersect1d(runs_a["N"].cast(pl.Float64).unique().to_numpy(),
                            runs_b["N"].cast(pl.Float64).unique().to_numpy())
    if shared.size < max(min_sizes, 3):
        raise AnalysisInputError(f"{shared.size} sizes shared by {names[0]} and {names[1]}; "
                                 f"need >= {max(min_sizes, 3)} for a comparison of asymptotes")
    ra = _read(runs_a.with_columns(pl.col("N").cast(pl.Float64)), names[0], shared, scale)
    rb = _read(runs_b.with_columns(pl.col("N").cast(pl.Float64)), names[1], shared, scale)
    known = asymptotes or (None, None)
    pts = [k if _fits_shared(k, f, shared, level, scale) else
           recipe_asymptote(size_points(f.with_columns(pl.col("N").cast(pl.Float64))
                                        .filter(pl.col("N").is_in(shared.tolist())), scale), level)
           for f, k in zip((runs_a, runs_b), known)]
    fa, fb = _fit(ra, pts[0]), _fit(rb, pts[1])
    rng = np.random.default_rng(seed)
    if resample == "seeds":
        if min(r.size for r in ra.rows + rb.rows) < 2:
            raise AnalysisInputError("resample='seeds' needs >= 2 seeds at every shared size")
        sizes = np.tile(np.arange(shared.size), (n_boot, 1))
        boot_a, boot_b = _inflated(fa, ra), _inflated(fb, rb)
    else:
        sizes = _draw_sizes(rng, shared.size, n_boot, min(min_sizes, shared.size))
        boot_a, boot_b = fa, fb
    ca, cb = _counts(rng, sizes, ra, rb, ra.x.size, rb.x.size)
    pa, oka = refit_counts(boot_a, ca)
    pb, okb = refit_counts(boot_b, cb)
    e = fa.law.param_names.index("E")
    samples = pa[:, e] - pb[:, e]
    q = [50 * (1 - level), 50 * (1 + level)]
    lo, hi = (float(v) for v in np.percentile(samples, q))
    return RecipeComparison(
        names=tuple(names), E=(pts[0].E, pts[1].E), delta=pts[0].E - pts[1].E, ci=(lo, hi), p_value=_pvalue(samples),
        level=level, n_boot=n_boot, sizes=tuple(float(s) for s in shared),
        matched=_matched(ra, rb, shared, level),
        converged=float(np.mean(np.concatenate([oka, okb]))), samples=samples,
        asymptotes=(pts[0], pts[1]))
