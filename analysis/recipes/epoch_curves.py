"""Recipes across epochs at one unique-token budget U: each recipe's loss against the number
of epochs, per model size, with the SD of every point.

Prabhudesai et al. 2025 ("Diffusion Beats Autoregressive in Data-Constrained Settings",
arXiv 2507.15857) compare recipes (an autoregressive and a masked-diffusion objective) by
their loss as the same U unique tokens are repeated for more and more epochs. The curves:

- recipes: ``rows.find_recipes`` (one recipe per block when nothing else names them);
- the budget U: the one where the most recipes have runs at >= ``MIN_EPOCHS`` epoch values
  (ties: ``names.base_budget`` of those recipes' runs);
- per (recipe, N, epochs) the best cell over the other axes (e.g. lr) by the one rule of
  ``cells.best_cells`` (mean loss over its seeds); the point is that cell's mean loss.

The SD of a point (``sigma``), a mean of m seeds:

- its Monte Carlo SE: the runs' ``final_loss_se`` (a masked-diffusion ELBO is estimated from a
  fixed set of masking draws; an exact NLL has none: null or absent reads 0), as
  sqrt(mean se^2 / m);
- plus the run-to-run noise tau / sqrt(m): tau from replicate seeds when the runs have any
  (``replicates.find_replicates``, the pooled within-cell SD); else a noise floor from the
  curves' roughness (``roughness``): the residual SD of each curve about a cubic in
  ln(epochs), pooled, less the mean squared Monte Carlo SE. What the cubic misses of a
  curve's bend adds to the residuals, so the floor errs large (a wider interval, never a
  narrower one).

``loss_is_bound`` (True where the loss is an upper bound on the NLL, e.g. an ELBO) marks a
recipe as a bound when any of its runs is. Pure polars/numpy.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
import polars as pl

from analysis.errors import AnalysisInputError
from analysis.recipes.names import base_budget
from analysis.recipes.replicates import find_replicates
from analysis.recipes.rows import recipes_or_none
from analysis.tables.cells import best_cells, cell_columns

__all__ = ["BOUND", "MIN_EPOCHS", "SE", "EpochCurves", "epoch_curves", "epochs_of", "roughness"]

MIN_EPOCHS = 3
"""Epoch values a recipe needs at the shared U: a crossover between two sampled epochs and a
curve's bend need three."""
SE = "final_loss_se"
"""runs.parquet's column: the Monte Carlo SE of final_loss (null: exact)."""
BOUND = "loss_is_bound"
"""runs.parquet's column: True where final_loss is an upper bound on the NLL (an ELBO)."""


@dataclass(frozen=True)
class EpochCurves:
    """Each recipe's loss per (N, epochs) at budget ``U``."""

    U: float
    points: pl.DataFrame
    """recipe, N, size (``same_sizes``: the N recipes are compared at), epochs, loss, seeds, se
    (Monte Carlo SE of the mean), sigma (its SD), bound."""
    recipes: tuple[str, ...]
    tau: float
    """Run-to-run SD of one run's loss added to every point (beside its Monte Carlo SE)."""
    tau_from: str
    """Where tau comes from, in words."""
    bound: dict[str, bool]
    """Recipe -> whether its loss is an upper bound on the NLL."""
    source: str
    """Where the recipes came from (``find_recipes``)."""

    @property
    def sizes(self) -> list[float]:
        """The sizes the recipes are compared at (``same_sizes``), ascending."""
        return sorted(set(self.points["size"].to_list()))

    def curve(self, recipe: str, n: float) -> pl.DataFrame:
        """One recipe's points at size ``n`` (a value of ``sizes``), by epochs."""
        return self.points.filter((pl.col("recipe") == recipe) & (pl.col("size") == n)).sort("epochs")


SAME_SIZE_REL = 0.02
"""Parameter counts within 2% of each other are one model size: the masked-diffusion
objective's [MASK] embedding row adds d parameters to the same preset (0.1-0.2% on the CPU
twin), and a recipe compared with another at "the same size" means the same shape."""


def same_sizes(n: pl.Series) -> pl.Series:
    """Each N's size: the smallest N of its group; a group starts at the smallest N not yet
    grouped and holds every N within ``SAME_SIZE_REL`` above it."""
    size: dict[float, float] = {}
    first = None
    for v in sorted(set(n.to_list())):
        if first is None or v > first * (1 + SAME_SIZE_REL):
            first = v
        size[v] = first
    return n.replace_strict(size, return_dtype=pl.Float64)


def epochs_of(frame: pl.DataFrame) -> pl.Expr:
    """The epochs of each run: the ``epochs`` column, else D_total / D_unique (6 digits, so
    that 64.0000001 and 64 are one value)."""
    if "epochs" in frame.columns:
        e = pl.col("epochs").cast(pl.Float64, strict=False)
    elif {"D_total", "D_unique"} <= set(frame.columns):
        e = pl.col("D_total").cast(pl.Float64, strict=False) / pl.col("D_unique").cast(pl.Float64, strict=False)
    else:
        raise AnalysisInputError("runs need an `epochs` column or D_total and D_unique")
    return e.map_batches(lambda s: pl.Series(_round6(s.to_numpy())), return_dtype=pl.Float64)


def _round6(v: np.ndarray) -> np.ndarray:
    out = np.asarray(v, dtype=float).copy()
    ok = np.isfinite(out) & (out > 0)
    digits = 5 - np.floor(np.log10(out[ok]))
    out[ok] = np.array([round(x, int(d)) for x, d in zip(out[ok], digits)])
    return out


def roughness(curves: list[tuple[np.ndarray, np.ndarray]]) -> tuple[float, int]:
    """(the SD of one point from the curves' roughness, its degrees of freedom): each curve
    (x = ln epochs, y) of k >= 3 points fitted by a polynomial in x of degree min(3, k - 2),
    sigma = sqrt(SUM SSE / SUM (k - degree - 1)) over the curves. A cubic in ln(epochs) follows
    a data-constrained curve closely (on Muennighoff-law curves over 1-256 epochs its residual
    SD is 0.007 nats with no noise at all), and what it misses counts as noise: it errs large."""
    ss, dof = 0.0, 0
    for x, y in curves:
        if x.size < 3:
            continue
        deg = min(3, x.size - 2)
        coef = np.polyfit(x, y, deg)
        ss += float(np.sum((np.polyval(coef, x) - y) ** 2))
        dof += x.size - deg - 1
    return (math.sqrt(ss / dof) if dof else math.nan), dof


def _recipe_frames(data: pl.DataFrame, recipes=None) -> tuple[dict[str, pl.DataFrame], str]:
    rows = recipes_or_none(data, recipes)  # a bad filter is bad input
    if rows is None:
        return {}, "no recipes"  # a table without recipes is no study of recipes
    frames = {name: data.filter(pred) for name, pred in rows.predicates.items()}
    frames = {k: v for k, v in frames.items() if v.height}
    key = next((c for c in ("run_id", "name") if c in data.columns), None)
    if key is not None:
        seen: set = set()
        for f in frames.values():
            ids = set(f[key].to_list())
            if ids & seen:  # nested recipes (Kim's standard within regularized): no two
                return {}, rows.source  # objectives to compare across epochs
            seen |= ids
    return frames, rows.source


def _pick_budget(frames: dict[str, pl.DataFrame]) -> tuple[float, list[str]] | None:
    """(U, the recipes with >= 2 epoch values there), the U with the most recipes of
    >= MIN_EPOCHS epoch values; None when no U has two recipes of >= 2 epoch values."""
    counts: dict[float, dict[str, int]] = {}
    for name, f in frames.items():
        for (u,), sub in f.group_by("U"):
            counts.setdefault(float(u), {})[name] = sub["_epochs"].n_unique()
    best = None
    for u, per in counts.items():
        multi = [r for r, k in per.items() if k >= 2]
        full = sum(k >= MIN_EPOCHS for k in per.values())
        if len(multi) >= 2 and (best is None or full > best[2]):
            best = (u, multi, full)
    if best is None:
        return None
    tied = [u for u, per in counts.items()
            if sum(k >= MIN_EPOCHS for k in per.values()) == best[2] and sum(k >= 2 for k in per.values()) >= 2]
    if len(tied) > 1:
        u = base_budget(pl.concat([frames[r].filter(pl.col("U").is_in(tied)).select("U") for r in frames])["U"])
        return u, [r for r, k in counts[u].items() if k >= 2]
    return best[0], best[1]


def epoch_curves(data: pl.DataFrame, recipes=None) -> EpochCurves | str | None:
    """The curves of ``data`` (the report's fit table: N, U, loss and the runs' columns), or
    why there are none: None when fewer than two recipes run at >= 2 epoch values at one U
    (no epoch study: nothing to say), else a line when fewer than two reach ``MIN_EPOCHS``."""
    data = data.with_columns(epochs_of(data).alias("_epochs"))
    frames, source = _recipe_frames(data, recipes)
    picked = _pick_budget(frames)
    if picked is None:
        return None
    U, multi = picked
    spans = {r: frames[r].filter(pl.col("U") == U)["_epochs"].n_unique() for r in multi}
    short = {r: k for r, k in spans.items() if k < MIN_EPOCHS}
    if len(spans) - len(short) < 2:
        said = ", ".join(f"{r}: {k}" for r, k in sorted(short.items()))
        return (f"recipes across epochs: not written: at U = {U:.4g} fewer than 2 recipes span >= "
                f"{MIN_EPOCHS} epoch values ({said}); a crossover between sampled epochs needs {MIN_EPOCHS}")
    names = tuple(r for r in frames if r in spans and r not in short)
    if SE in data.columns:
        se = data[SE].cast(pl.Float64, strict=False).drop_nulls()
        if bad := int((~se.is_finite() | (se < 0)).sum()):
            raise AnalysisInputError(f"column {SE}: {bad} value(s) not finite or negative (a Monte Carlo SE is "
                                     ">= 0; null for an exact loss)")
    cols = cell_columns(data)
    parts = []
    for r in names:
        at_u = frames[r].filter(pl.col("U") == U)
        for (e,), sub in at_u.group_by("_epochs"):
            _, cells = best_cells(sub, cols)
            picked_runs = sub.join(cells.select(cols), on=cols, how="semi", nulls_equal=True)
            se = (pl.col(SE).cast(pl.Float64, strict=False).fill_null(0.0) if SE in sub.columns else pl.lit(0.0))
            bound = (pl.col(BOUND).cast(pl.Boolean, strict=False).fill_null(False) if BOUND in sub.columns
                     else pl.lit(False))
            parts.append(picked_runs.group_by("N").agg(
                pl.col("loss").mean(), pl.len().alias("seeds"), (se ** 2).mean().alias("_se2"),
                bound.any().alias("bound")).with_columns(pl.lit(r).alias("recipe"), pl.lit(float(e)).alias("epochs")))
    pts = pl.concat(parts, how="vertical_relaxed").with_columns(
        (pl.col("_se2") / pl.col("seeds")).sqrt().alias("se")).sort("recipe", "N", "epochs")
    se_sq = pts["_se2"].to_numpy()
    reps = find_replicates(pl.concat([frames[r].filter(pl.col("U") == U) for r in names], how="diagonal_relaxed"),
                           loss="loss")
    if reps.found:
        tau, tau_from = reps.sigma, f"replicate seeds: {reps.source()}"
    else:
        groups = [(np.log(g["epochs"].to_numpy()), g["loss"].to_numpy())
                  for _, g in pts.sort("epochs").group_by("recipe", "N", maintain_order=True)]
        rough, k = roughness(groups)
        tau = math.sqrt(max(rough ** 2 - float(np.mean(se_sq)), 0.0)) if k else 0.0
        tau_from = (f"no replicate seeds: a noise floor from the curves' roughness (residual SD {rough:.2g} "
                    f"about a cubic in ln(epochs) per curve, {k} degrees of freedom, less the Monte Carlo SE; "
                    "what the cubic misses of a curve's bend counts as noise, so it errs large)")
    pts = pts.with_columns(((pl.col("_se2") + tau ** 2) / pl.col("seeds")).sqrt().alias("sigma"),
                           same_sizes(pts["N"]).alias("size")).select(
        "recipe", "N", "size", "epochs", "loss", "seeds", "se", "sigma", "bound")
    bound = {r: bool(pts.filter(pl.col("recipe") == r)["bound"].any()) for r in names}
    return EpochCurves(U, pts, names, float(tau), tau_from, bound, source)
