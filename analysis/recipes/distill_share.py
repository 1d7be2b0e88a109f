"""How much of the ensembling gain a distilled student keeps, with a 95% CI over seeds (Kim
et al. 2025, "Pre-training under infinite compute", arXiv 2509.14786: distilling an ensemble
into one model of the same size keeps most of the ensemble's gain).

    share = (L_single - L_student) / (L_single - L_ensemble) = a / b

L_single: the best single model of the student's size N at the base budget (the lowest loss
any recipe reached at N: the regularized recipe's, in Kim's layout), the mean of its best
cell's m seeds; L_ensemble: the largest-K logit-averaged ensemble of size N; L_student: the
mean over a block's seeds (a block is one student config; ``seeds:`` gives its replicates).
1 = the student matches the ensemble, 0 = no better than one model, < 0 worse.

The interval is Fieller's (Fieller 1954, "Some problems in interval estimation", JRSS B 16:
175-185; von Luxburg & Franz 2009, Statistica Sinica 19:1095-1117): the shares r with
(a - r b)^2 <= t^2 Var(a - r b). It is the exact set for a ratio of normal estimates, and it is
unbounded exactly when the denominator's own CI reaches 0 (b^2 <= t^2 Var b), where a delta
method would print a finite, wrong interval. The noise:

- the student: its seeds' sample variance s^2/n (a t-interval of the mean, n - 1 dof); with
  one seed, the replicate sigma^2 of one run, when there is one;
- L_single: sigma^2/m; L_ensemble: sigma^2, one run's, not sigma^2/K: an ensemble's loss is
  not the mean of its members' losses, so only "no noisier than one run" is assumed
  (conservative). sigma is the sweep's replicate-seed SD of one run
  (``replicates.find_replicates``, the one source of it) with its dof; the two are taken as
  independent, and L_single's selection as the lowest of several cells is not corrected.

Var(a - r b) = s^2/n + sigma^2 ((1 - r)^2/m + r^2) (a and b share L_single). t is Student's at
Satterthwaite's dof of that sum at the estimated share (Satterthwaite 1946, Biometrics
Bulletin 2:110-114). With one seed and no replicate sigma: the share without a CI. Pure
polars/numpy/scipy.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import polars as pl
from scipy import stats

from analysis.errors import AnalysisInputError
from analysis.recipes.infinite_compute import RecipeAnalysis
from analysis.recipes.names import SEED_MEAN

__all__ = ["LEVEL", "ShareCI", "share_ci", "share_lines", "student_shares"]

LEVEL = 0.95
"""Confidence of every interval here."""


@dataclass(frozen=True)
class ShareCI:
    """A student's share with Fieller's interval (module docstring)."""

    share: float
    loss: float
    """The student's mean loss over its seeds."""
    seeds: int
    loss_half: float
    """95% t half-width of that mean (nan: one seed)."""
    gain: float
    """b = L_single - L_ensemble."""
    gain_half: float
    """t sqrt(Var b) (nan: no CI)."""
    lo: float = math.nan
    hi: float = math.nan
    no_ci: str | None = None
    """Why there is no interval (None: there is one, bounded or not)."""
    student_sd_from: str = "seeds"
    """'seeds' or 'replicates' (one seed: the replicate sigma of one run)."""
    terms: tuple[float, float, float, float, float, float] = (math.nan,) * 6
    """a, b, Var a, Var b, Cov(a, b), t."""

    @property
    def unbounded(self) -> bool:
        return self.no_ci is None and not math.isfinite(self.lo)

    def contains(self, r: float) -> bool:
        """Whether share r is in Fieller's set (also when it is unbounded)."""
        a, b, va, vb, cov, t = self.terms
        return (a - r * b) ** 2 <= t * t * (va - 2 * r * cov + r * r * vb)


def share_ci(students: Sequence[float], single: float, ensemble: float, *, single_seeds: int = 1,
             sigma: float = math.nan, sigma_dof: int = 0) -> ShareCI:
    """The share of a student's seeds' mean loss, and its CI (module docstring)."""
    y = np.asarray(students, dtype=float)
    if not (y.size and single - ensemble != 0):  # a gain < 0 is valid here (student_shares
        raise AnalysisInputError(  # reports no share for it; Fieller's set is still defined)
            f"a share needs >= 1 student loss and a nonzero gain, got {y.size}, {single - ensemble}")
    n, loss = int(y.size), float(y.mean())
    a, b = single - loss, single - ensemble
    half = float(stats.t.ppf(0.5 + LEVEL / 2, n - 1) * y.std(ddof=1) / math.sqrt(n)) if n >= 2 else math.nan
    point = dict(share=a / b, loss=loss, seeds=n, loss_half=half, gain=b, gain_half=math.nan)
    if not (math.isfinite(sigma) and sigma_dof > 0):
        why = "1 seed" if n < 2 else "no replicate seeds for the single model's and the ensemble's noise"
        return ShareCI(**point, no_ci=why)
    s2, ss = sigma ** 2, (float(y.var(ddof=1)) / n if n >= 2 else 0.0)
    if n < 2:  # one seed: the student is one run of noise sigma
        point["student_sd_from"] = "replicates"
    var1 = s2 / single_seeds
    va, vb, cov = var1 + ss + (s2 if n < 2 else 0.0), var1 + s2, var1
    r = a / b
    v_sigma = va - 2 * r * cov + r * r * vb - ss  # the sigma^2 part of Var(a - r b)
    dof = (ss + v_sigma) ** 2 / ((ss ** 2 / (n - 1) if n >= 2 else 0.0) + v_sigma ** 2 / sigma_dof)
    t = float(stats.t.ppf(0.5 + LEVEL / 2, dof))
    point["gain_half"] = t * math.sqrt(vb)
    fieller = (a, b, va, vb, cov, t)
    qa, qb, qc = b * b - t * t * vb, -2 * (a * b - t * t * cov), a * a - t * t * va
    if qa <= 0:  # the denominator's CI reaches 0
        return ShareCI(**point, lo=-math.inf, hi=math.inf, terms=fieller)
    root = math.sqrt(max(qb * qb - 4 * qa * qc, 0.0))
    return ShareCI(**point, lo=(-qb - root) / (2 * qa), hi=(-qb + root) / (2 * qa), terms=fieller)


def _single(res: RecipeAnalysis, n: float) -> tuple[float, int]:
    """The best single model's loss at N and the seeds its mean is over."""
    rows = res.best_per_n.filter((pl.col("N") == n) & ~pl.col("recipe").str.starts_with("ensemble"))
    if not rows.height:
        return math.nan, 1
    best = rows.sort("loss").row(0, named=True)
    if best["recipe"] == SEED_MEAN:
        m = res.members.filter(pl.col("N") == n).height
    else:
        cell = res.cell_rows.get(best["recipe"])
        m = cell.filter(pl.col("N") == n).height if cell is not None else 1
    return float(best["loss"]), max(m, 1)


def student_shares(res: RecipeAnalysis) -> pl.DataFrame:
    """One row per student block and size: block, N, seeds, loss (mean), single, ensemble,
    K, share, ci (``ShareCI``, null: no share) and why (share null: the reason)."""
    rows = []
    groups = res.students.group_by("block", "N", maintain_order=True) if res.students.height else []
    for (block, n), sub in groups:
        n = float(n)
        L1, m = _single(res, n)
        ens = res.ensemble.filter(pl.col("N") == n)
        K = int(ens["K"].max()) if ens.height else None
        LK = float(ens.filter(pl.col("K") == K)["loss"][0]) if ens.height else math.nan
        why = None
        if math.isnan(L1):
            why = f"no single model of N={int(n):,} at the base budget"
        elif K is None or K < 2:
            why = f"no ensemble of N={int(n):,} (run `scalelab ensemble SWEEP`)"
        elif not L1 - LK > 0:
            why = f"the ensemble of N={int(n):,} is no better than its best single model"
        ci = None if why else share_ci(sub["loss"].to_list(), L1, LK, single_seeds=m,
                                       sigma=res.replicates.sigma, sigma_dof=res.replicates.dof)
        rows.append((block, n, sub.height, float(sub["loss"].mean()), L1, LK, K,
                     ci.share if ci else None, ci, why))
    schema = {"block": pl.String, "N": pl.Float64, "seeds": pl.Int64, "loss": pl.Float64,
              "single": pl.Float64, "ensemble": pl.Float64, "K": pl.Int64, "share": pl.Float64,
              "ci": pl.Object, "why": pl.String}
    return pl.DataFrame(rows, schema=schema, orient="row")


def _pct(x: float) -> str:
    return f"{100 * x:.0f}%"


def _ci_text(ci: ShareCI) -> str:
    """The interval part of a share line."""
    if ci.no_ci:
        return f"; no CI ({ci.no_ci})"
    if ci.unbounded:
        return (f"; {LEVEL:.0%} CI unbounded: the gain {ci.gain:.4f} ± {ci.gain_half:.4f} "
                f"is within noise of 0")
    span = f"{_pct(ci.lo)}-{_pct(ci.hi)}" if ci.lo >= 0 else f"{_pct(ci.lo)} to {_pct(ci.hi)}"
    src = "" if ci.student_sd_from == "seeds" else "; the student's noise: the replicate sigma"
    return f" ({LEVEL:.0%} CI {span}{src})"


def share_lines(res: RecipeAnalysis) -> list[str]:
    """One sentence per student block: its mean loss over seeds against one model and the
    ensemble, and its share with the 95% CI."""
    out = []
    for r in student_shares(res).iter_rows(named=True):
        seeds = f"{r['seeds']} seed{'s' if r['seeds'] != 1 else ''}"
        head = f"{r['block']} student (N={int(r['N']):,}, {seeds}): loss {r['loss']:.4f}"
        ci: ShareCI | None = r["ci"]
        if ci is not None and math.isfinite(ci.loss_half):
            head += f" ± {ci.loss_half:.4f}"
        if r["why"]:
            out.append(f"{head}; no share: {r['why']}")
            continue
        out.append(f"{head}, best single model {r['single']:.4f}, K={r['K']} ensemble {r['ensemble']:.4f}: "
                   f"keeps {_pct(r['share'])} of the ensembling gain{_ci_text(ci)}")
    return out
