"""Recipes under a fixed data budget and unlimited compute (Kim et al. 2025, arXiv 2509.14786).

Recipes are found by ``analysis.recipes.rows``: explicit filters, else the runs' ``recipe``
column (``extra.recipe``), else the block layout of ``sweeps/200M_tokens.yaml`` /
``sweeps/tiny_infinite_compute.yaml`` (blocks ``tuned``, ``data``, ``ensemble``,
``distill-ensemble``, ``self-distill``). It computes:

- per recipe, e.g. **standard** (wd = ``ref_wd``, ``names.REF_WD``; epochs tuned) and **regularized** (wd
  and epochs tuned): the best loss per N at the base budget U0 (``names.base_budget``: the budget most recipe
  runs share), fitted as A/N^B + C
  (``analysis.fit.power_law.fit_asymptote``, Kim's plain least squares; N in millions here, which
  rescales A only) -> the N -> inf asymptote C with a t-interval from the Gauss-Newton covariance.
- **the regularized recipe's seed mean** (``names.SEED_MEAN``): where an ensemble's members are seeds of the regularized
  recipe's best cell at N (member 0 is that run), the mean over them replaces the single
  best run, and is fitted the same way (``_seed_means``).
- **ensembles** (``<sweep>/ensembles/evals.parquet``, logit averaging): per N, loss vs K as
  A/K + C (``power_law.ensemble_asymptote``: B = 1, the ensemble's variance term), then those
  K -> inf asymptotes vs N as A/N^B + C: the joint N, K -> inf limit.
- **distillation**: the students' losses, against the single model of their size and its
  teacher ensemble ("share of the ensembling gain kept").
- **data efficiency**: the reference (standard) recipe's best loss at each budget U, fitted
  as A/U^B + C where an F test supports the floor C, else as A/U^B
  (``data_multiplier.choose_data_law``), and inverted, D_eff(L) = (A/(L - C))^(1/B); a
  recipe's multiplier is D_eff(L)/D_eff(L_ref) with L_ref the standard recipe's best loss at
  U0 (Kim's "1x"), with a residual-bootstrap CI (``data_multiplier.data_multiplier``). Without
  a floor the multiplier is a lower bound. A multiplier that cannot be trusted (L at or below
  the floor, an infinite CI, or beyond 1e6) is left out (nan, with the reason in ``why``).
- **budgets**: where a recipe has runs at several budgets U, its asymptote and multiplier at
  each (``budgets``): whether the gain persists at larger budgets.
- ``reportable``: whether an asymptote may be written as a number (>= 4 points, a finite
  interval, identified). Markdown: ``analysis.report.infinite_compute_md``; figure in the manner
  of Kim et al.'s Figure 1: ``analysis.plots.recipes``.

Pure polars/numpy/scipy/matplotlib (no torch, no scalelab): reads ``runs.parquet``
(``scalelab collect``) and the ensemble evals. ``python -m analysis.report.infinite_compute_md SWEEP``.
"""

from __future__ import annotations

import math
import warnings
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

import numpy as np
import polars as pl

from analysis.errors import AnalysisInputError
from analysis.fit.identified import (
    MIN_SIZES,
    MIN_SIZES_E,
    unidentified,
)
from analysis.fit.power_law import SCALE, PowerLawFit, ensemble_asymptote, fit_asymptote
from analysis.recipes.budgets import SCHEMA as BUDGET_SCHEMA
from analysis.recipes.budgets import budget_asymptotes
from analysis.recipes.cells import size_points
from analysis.recipes.data_multiplier import DataLaw, choose_data_law, data_multiplier
from analysis.recipes.names import ENSEMBLE_K, JOINT, REF_WD, SEED_MEAN, SEED_MEAN_OF, base_budget
from analysis.recipes.recipe_asymptote import RecipeE, flag_of, recipe_asymptote, reportable
from analysis.recipes.replicates import NONE, Replicates, find_replicates
from analysis.recipes.rows import RecipeRows, find_recipes, reference_recipe
from analysis.tables.cells import best_cells, cell_columns
from analysis.tables.ensemble_groups import pick_groups
from analysis.tables.runs import drop_stale

__all__ = [
    "MIN_POINTS",
    "MIN_POINTS_E",
    "Blocks",
    "RecipeAnalysis",
    "analyze",
    "compare_asymptotes",
    "ensemble_beats_members",
    "flag_of",
    "reportable",
    "unidentified",
]

MIN_POINTS = MIN_SIZES
"""Points a 3-parameter fit needs before a multiplier from its asymptote is written:
``identified.MIN_SIZES`` (two residual degrees of freedom; the reason is written there). A fit
with B fixed (A/K + C) needs ``identified.min_sizes(2)``."""
MIN_POINTS_E = MIN_SIZES_E
"""Points before an asymptote itself is written: one residual degree of freedom, flagged
(``identified.one_dof_flag``); ``identified.MIN_SIZES_E``."""


@dataclass(frozen=True)
class Blocks:
    """Which sweep blocks hold which recipe (the plan's ``block`` column)."""

    tuned: str = "tuned"
    data: str = "data"
    ensemble: str = "ensemble"
    students: tuple[str, ...] = ("distill-ensemble", "self-distill")


@dataclass
class RecipeAnalysis:
    U0: float
    """The base unique-token budget (the tuned block's)."""
    best_per_n: pl.DataFrame
    """recipe, N, loss, name (the run achieving the best loss at that N)."""
    fits: dict[str, PowerLawFit | None]
    """Each recipe's fit vs N (x = N / 1e6; ``names``: the recipes, ``SEED_MEAN``, ``JOINT``)."""
    ensemble: pl.DataFrame
    """N, K, loss (logit averaging), plus the members' own losses (K = 1 rows per member)."""
    k_fits: dict[int, PowerLawFit | None]
    members: pl.DataFrame
    """N, member, loss: each member alone."""
    data_points: pl.DataFrame
    """U, loss, name: the standard recipe's best loss per budget."""
    data_fit: PowerLawFit | None
    ref_loss: float
    students: pl.DataFrame
    asymptotes: pl.DataFrame
    multipliers: pl.DataFrame
    """recipe, loss, data_multiplier, lo, hi (its interval), why (no multiplier: the reason)."""
    notes: list[str] = field(default_factory=list)
    reference: str = "standard"
    """The recipe the multipliers are relative to (Kim's 1x)."""
    recipe_source: str = ""
    """Where the recipes came from (filters, the recipe column, or the blocks)."""
    has_ensembles: bool = False
    """Whether ensemble evals were given."""
    data_law: DataLaw | None = None
    """The reference recipe's data law in U as the multipliers use it (floor C or none)."""
    cell_rows: dict[str, pl.DataFrame] = field(default_factory=dict)
    """Recipe -> the runs of its best cell per N at U0 (N, loss, seed, flops; ``cells``):
    the rows ``scalelab compare`` compares, for the verdicts' paired bootstrap."""
    judged: dict[str, RecipeE] = field(default_factory=dict)
    """Recipe -> its fit at U0 and whether its E may be written (``recipe_asymptote``): the
    one fit of those points, which the verdicts and the multipliers read (``fits`` holds the
    same fit objects)."""
    replicates: Replicates = NONE
    """The sweep's replicate seeds and the SD of one run's loss (``replicates``)."""
    budgets: pl.DataFrame = field(default_factory=lambda: pl.DataFrame(schema=BUDGET_SCHEMA))
    """Each non-reference recipe's asymptote and multiplier at every budget U where it has
    runs of enough sizes, when it has runs at >= 2 budgets (``budgets.budget_asymptotes``)."""
    bounds: tuple[str, ...] = ()
    """The recipes whose loss is an upper bound on the NLL, not the NLL (a run with
    ``loss_is_bound``: the masked-diffusion ELBO; docs/diffusion.md)."""


def _fit(x, y, notes: list[str], what: str, law=fit_asymptote) -> PowerLawFit | None:
    x, y = np.asarray(x, float), np.asarray(y, float)
    if x.size < 3:
        notes.append(f"{what}: {x.size} point(s), need >= 3 for A/x^B + C; not fitted")
        return None
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            return law(x, y)
    except (RuntimeError, ValueError, AnalysisInputError) as err:
        notes.append(f"{what}: fit failed ({err})")
        return None


def _best(frame: pl.DataFrame, by: str) -> pl.DataFrame:
    return frame.sort("loss").group_by(by, maintain_order=True).first().sort(by)


def _bound_recipes(tagged: dict[str, pl.DataFrame]) -> tuple[str, ...]:
    """The recipes with a run whose loss is an upper bound (``loss_is_bound``)."""
    return tuple(name for name, f in tagged.items()
                 if "loss_is_bound" in f.columns and f["loss_is_bound"].fill_null(False).any())


def _tagged(done: pl.DataFrame, rows: RecipeRows) -> dict[str, pl.DataFrame]:
    """Each recipe's COMPLETED runs (a run may belong to several recipes)."""
    return {name: done.filter(pred) for name, pred in rows.predicates.items()}


def _ensemble_part(ensembles: pl.DataFrame | None, notes: list[str], run_ids: pl.Series | None = None):
    """Logit-averaged ensemble losses vs K, members alone, per-N K fits and K -> inf asymptotes
    (one ensemble group per N: ``analysis.tables.ensemble_groups``)."""
    ens = pl.DataFrame(schema={"N": pl.Float64, "K": pl.Int64, "loss": pl.Float64})
    members = pl.DataFrame(schema={"N": pl.Float64, "member": pl.Int64, "loss": pl.Float64})
    k_fits: dict[int, PowerLawFit | None] = {}
    k_asym: list[tuple[float, float]] = []
    if ensembles is None or not ensembles.height:
        notes.append("no ensemble evals (run `scalelab ensemble SWEEP`)")
        return ens, members, k_fits, k_asym
    ensembles = pick_groups(ensembles, run_ids, notes)
    ens = (ensembles.filter(pl.col("method") == "logits")
           .select(pl.col("N").cast(pl.Float64), pl.col("members").alias("K"), "loss").sort("N", "K"))
    members = (ensembles.filter(pl.col("method") == "member")
               .select(pl.col("N").cast(pl.Float64), "member", "loss").sort("N", "member"))
    for (n,), sub in ens.group_by("N", maintain_order=True):
        k_fits[int(n)] = f = _fit(sub["K"], sub["loss"], notes, f"ensemble of N={int(n)} vs K", ensemble_asymptote)
        if (why := unidentified(f)) is None:
            k_asym.append((n, f.E))
        else:
            notes.append(f"ensemble of N={int(n):,} vs K: {why}; left out of the joint N, K fit")
    return ens, members, k_fits, k_asym


SAME_RUN_TOL = 1e-5
"""Member 0 is the best run when their losses agree this closely: the ensemble evaluator
re-evaluates it and agrees to ~1e-6 (float32 sums in another order)."""


def _seed_means(best: pl.DataFrame, members: pl.DataFrame, recipe: str) -> pl.DataFrame:
    """Per N where an ensemble's member 0 *is* ``recipe``'s best run (the same loss): the
    mean loss of its members, i.e. of that best cell over its seeds (init and data order).
    One run's final loss scatters by 0.01-0.03 nats across seeds (docs/calibration.md), and
    the best of a grid of single runs is biased low by it; the mean over M seeds is not, and
    scatters sqrt(M) times less. Empty unless >= MIN_POINTS sizes have >= 2 seeds."""
    chosen = best.filter(pl.col("recipe") == recipe).select("N", pl.col("loss").alias("best"))
    m0 = members.filter(pl.col("member") == 0).select("N", pl.col("loss").alias("m0"))
    same = chosen.join(m0, on="N").filter((pl.col("best") - pl.col("m0")).abs() <= SAME_RUN_TOL)
    means = (members.join(same.select("N"), on="N").group_by("N")
             .agg(pl.col("loss").mean(), pl.len().alias("seeds")).filter(pl.col("seeds") >= 2).sort("N"))
    if means.height < MIN_POINTS:
        return means.clear().select("N", "loss", pl.lit("").alias("name"), pl.lit("").alias("recipe"))
    return means.select("N", "loss", (pl.lit("mean of ") + pl.col("seeds").cast(pl.String) + " seeds").alias("name"),
                        pl.lit(SEED_MEAN).alias("recipe"))


def _data_law(points: pl.DataFrame, notes: list[str], ref_name: str) -> DataLaw | str:
    """The reference recipe's data law in U (``data_multiplier.choose_data_law``: the floor C
    only where an F test supports it), or why there is none."""
    try:
        law = choose_data_law(points["U"].to_numpy() / SCALE, points["loss"].to_numpy())
    except AnalysisInputError as err:
        return f"no data law of the {ref_name} recipe ({err})"
    notes.append(f"{ref_name} recipe vs U: data law {law.why}")
    return law


def _multipliers(cand: list[tuple[str, float, float]], law: DataLaw | str,
                 ref_loss: float) -> pl.DataFrame:
    """recipe | loss | data_multiplier | lo | hi | why: Kim et al.'s multiplier with its
    bootstrap CI (``data_multiplier``), or why there is none, in numbers."""
    rows = []
    if not isinstance(law, str) and not math.isfinite(ref_loss):
        law = "no run of the reference recipe at the base budget U0 to measure 1x from"
    for name, value, se in cand:
        if isinstance(law, str) or not math.isfinite(value):
            why = law if isinstance(law, str) else "no loss to convert"
            rows.append((name, value, math.nan, math.nan, math.nan, why))
            continue
        m = data_multiplier(law, value, se, ref_loss)
        if m.identified:
            rows.append((name, value, m.value, m.lo, m.hi, None))
        else:
            rows.append((name, value, math.nan, math.nan, math.nan, m.why))
    schema = {"recipe": pl.String, "loss": pl.Float64, "data_multiplier": pl.Float64, "lo": pl.Float64,
              "hi": pl.Float64, "why": pl.String}
    return pl.DataFrame(rows, schema=schema, orient="row")


def analyze(runs: pl.DataFrame, ensembles: pl.DataFrame | None = None, *, ref_wd: float = REF_WD,
            blocks: Blocks = Blocks(), loss: str = "final_loss",
            recipes: Mapping[str, Sequence[str]] | None = None,
            reference: str | None = None) -> RecipeAnalysis:
    """All recipe numbers of a sweep (see the module docstring). ``recipes``: explicit
    {name: {column: value}} filters (else the ``recipe`` column, else the blocks);
    ``reference``: the recipe multipliers are relative to (default "standard")."""
    notes: list[str] = []
    need = {"N", "D_unique", "state", loss, "name"}
    if missing := need - set(runs.columns):
        raise AnalysisInputError(f"runs table lacks {sorted(missing)} (run `scalelab collect SWEEP`)")
    runs, stale = drop_stale(runs)
    notes += [stale] if stale else []
    rows = find_recipes(runs, recipes, ref_wd=ref_wd, tuned_block=blocks.tuned,
                        role_blocks=(blocks.data, blocks.ensemble, *blocks.students))
    ref_name = reference_recipe(rows, reference)
    done = runs.filter((pl.col("state") == "COMPLETED") & pl.col(loss).is_finite())
    if dropped := runs.height - done.height:
        notes.append(f"{dropped} run(s) not COMPLETED (or without a finite loss) left out")
    done = done.with_columns(pl.col(loss).alias("loss"), pl.col("N").cast(pl.Float64),
                             pl.col("D_unique").cast(pl.Float64).alias("U"))
    tagged = _tagged(done, rows)
    every = pl.concat([f.select("U") for f in tagged.values()])
    if every.height == 0:
        raise AnalysisInputError(f"no COMPLETED run with a finite {loss} in any recipe "
                                 f"({', '.join(tagged)}; from {rows.source})")
    U0 = base_budget(every["U"])
    at_u0 = {name: f.filter(pl.col("U") == U0) for name, f in tagged.items()}
    # Per N the best cell by its mean loss over seeds, weighted by its seed count: the one
    # rule of the report, compare and next (``cells``), fitted by ``recipe_asymptote``.
    cols = cell_columns(done)
    best_parts, fits, cell_rows_of, judged = [], {}, {}, {}
    for recipe, frame in at_u0.items():
        cell_rows, cells = best_cells(frame, cols)
        cell_rows_of[recipe] = cell_rows
        best_parts.append(cells.select("N", pl.col("mean").alias("loss"),
                                       (pl.col("name") if "name" in cells.columns else pl.lit("")).alias("name"),
                                       pl.lit(recipe).alias("recipe")))
        judged[recipe] = recipe_asymptote(size_points(cell_rows))  # the one fit of its points
        fits[recipe] = judged[recipe].fit
        if cells.height < 3:
            notes.append(f"{recipe} vs N: {cells.height} point(s), need >= 3 for A/x^B + C; not fitted")
        elif fits[recipe] is None:
            notes.append(f"{recipe} vs N: fit failed")
    best = pl.concat(best_parts)
    run_ids = runs["run_id"] if "run_id" in runs.columns else None
    ens, members, k_fits, k_asym = _ensemble_part(ensembles, notes, run_ids)
    if (means := _seed_means(best, members, SEED_MEAN_OF)).height:
        fits[SEED_MEAN] = _fit(means["N"] / SCALE, means["loss"], notes, f"{SEED_MEAN} vs N")
        best = pl.concat([best, means.select(best.columns)])
    if len(k_asym) >= 3:
        n_arr, c_arr = np.array(k_asym).T
        fits[JOINT] = _fit(n_arr / SCALE, c_arr, notes, "ensemble asymptotes vs N")
    if k_asym:
        best = pl.concat([best, pl.DataFrame({"N": [a for a, _ in k_asym], "loss": [c for _, c in k_asym],
                                              "name": ["K->inf fit"] * len(k_asym),
                                              "recipe": [ENSEMBLE_K] * len(k_asym)})
                          .with_columns(pl.col("N").cast(pl.Float64))])

    # Distilled students (by block).
    keep = [c for c in ("block", "name", "run_id", "N", "loss") if c in done.columns]
    in_block = pl.col("block").is_in(list(blocks.students)) if "block" in done.columns else pl.lit(False)
    students = done.filter(in_block).select(keep)

    # Data scaling of the reference recipe: its best loss per budget U (+ the data block).
    ref_rows = tagged[ref_name]
    data_rows = [ref_rows.select("U", "loss", "name")]
    if "block" in done.columns:
        data_rows.append(done.filter(pl.col("block") == blocks.data).select("U", "loss", "name"))
    data_points = _best(pl.concat(data_rows).unique(), "U")
    data_fit = _fit(data_points["U"] / SCALE, data_points["loss"], notes, f"{ref_name} recipe vs U")
    ref_loss = float(at_u0[ref_name]["loss"].min()) if at_u0[ref_name].height else math.nan

    # Asymptotes with CIs, and data-efficiency multipliers (each with its interval).
    asymptotes = compare_asymptotes({k: v for k, v in fits.items() if v is not None})
    flags = {k: unidentified(v) for k, v in fits.items()}
    asymptotes = asymptotes.with_columns(
        pl.col("recipe").cast(pl.String)  # an empty frame's column is Null-typed
        .replace_strict(flags, default=None, return_dtype=pl.String).alias("not identified"))
    for name, why in flags.items():
        if why and why != "not fitted":
            notes.append(f"{name} vs N: {why}")
    if (why := unidentified(data_fit)) and why != "not fitted":
        notes.append(f"{ref_name} recipe vs U: the floor C is {why}")
    data_law = _data_law(data_points, notes, ref_name)
    cand: list[tuple[str, float, float]] = [(f"{ref_name}, best observed (1x)", ref_loss, 0.0)]
    for name, frame in at_u0.items():
        if name != ref_name and frame.height:
            cand.append((f"{name}, best observed", float(frame["loss"].min()), 0.0))
    if ens.height:
        kmax = ens.filter(pl.col("K") == ens["K"].max())
        cand.append((f"ensemble K={int(kmax['K'][0])}, best observed", float(kmax["loss"].min()), 0.0))
    if students.height:  # one row per student config (block, N): the mean over its seeds
        means = students.group_by("block", "N", maintain_order=True).agg(
            pl.col("loss").mean(), pl.len().alias("seeds"))
        sizes = means.group_by("block").len()
        several = set(sizes.filter(pl.col("len") > 1)["block"].to_list())
        for row in means.iter_rows(named=True):
            at = f" N={row['N']:,.0f}" if row["block"] in several else ""
            seeds = f" (mean of {row['seeds']} seeds)" if row["seeds"] > 1 else ""
            cand.append((f"{row['block']} student{at}{seeds}", float(row["loss"]), 0.0))
    for name, fit in fits.items():
        if fit is not None and reportable(fit, min_dof=2) is None:
            cand.append((f"{name} asymptote", fit.E, fit.e_se_t()))
    multipliers = _multipliers(cand, data_law, ref_loss)
    budgets = budget_asymptotes(tagged, cols, data_points, data_law, ref_name,
                                known={(name, U0): j for name, j in judged.items()})
    return RecipeAnalysis(U0, best, fits, ens, k_fits, members, data_points, data_fit, ref_loss,
                          students, asymptotes, multipliers, notes, reference=ref_name,
                          data_law=None if isinstance(data_law, str) else data_law,
                          recipe_source=rows.source, has_ensembles=ensembles is not None,
                          cell_rows=cell_rows_of, judged=judged,
                          replicates=find_replicates(runs, ensembles, loss=loss),
                          budgets=budgets, bounds=_bound_recipes(tagged))


def ensemble_beats_members(res: RecipeAnalysis) -> list[str]:
    """Per N, for every K >= 2: is the K-ensemble's loss below each of its K members'?"""
    out = []
    for (n,), sub in res.ensemble.group_by("N", maintain_order=True):
        alone = res.members.filter(pl.col("N") == n).sort("member")["loss"].to_list()
        parts = []
        for k, loss in zip(sub["K"].to_list(), sub["loss"].to_list()):
            if k >= 2 and len(alone) >= k:
                margin = min(alone[:k]) - loss
                parts.append(f"K={k}: {'yes' if margin > 0 else 'NO'} ({margin:+.4f})")
        out.append(f"N={int(n):,}: " + ", ".join(parts))
    return out


def compare_asymptotes(fits: Mapping[str, object], level: float = 0.95) -> pl.DataFrame:
    """Table recipe | asymptote | se | lo | hi | method, best first.

    Values: an ``PowerLawFit`` (Gauss-Newton covariance, t interval), a pair
    (FitResult, BootstrapResult) (the asymptote E, bootstrap SE and percentile CI), or a
    bare number (published value, no interval).
    """
    from analysis.fit.bootstrap import BootstrapResult
    from analysis.fit.fit import FitResult

    rows = []
    for name, item in fits.items():
        if isinstance(item, PowerLawFit):
            lo, hi = item.ci(level)
            rows.append((name, item.E, item.se["E"], lo, hi, "Gauss-Newton covariance"))
        elif isinstance(item, tuple) and len(item) == 2 and isinstance(item[0], FitResult):
            fit, boot = item
            if not isinstance(boot, BootstrapResult):
                raise AnalysisInputError(f"{name}: expected (FitResult, BootstrapResult)")
            lo, hi = boot.ci(level)["E"]
            rows.append((name, fit.params["E"], boot.se["E"], lo, hi, f"bootstrap n={boot.n}"))
        elif isinstance(item, (int, float)):
            rows.append((name, float(item), None, None, None, "published"))
        else:
            raise AnalysisInputError(f"{name}: cannot read an asymptote from {type(item).__name__}")
    return pl.DataFrame(
        rows, schema=["recipe", "asymptote", "se", "lo", "hi", "method"], orient="row"
    ).sort("asymptote")
