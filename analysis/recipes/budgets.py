"""A recipe's asymptote at each unique-token budget U, and its data multiplier there: does
the gain over the reference recipe persist at larger budgets?

Kim, Kotha, Liang, Hashimoto 2025, "Pre-training under infinite compute" (arXiv 2509.14786)
fit the regularized recipe's N -> inf asymptote at several token budgets and find the data
efficiency gain holding as the budget grows. Here, for every budget U at which a recipe has
runs of at least ``identified.MIN_SIZES`` sizes:

- its points are the report's (``cells.best_cells``: per N the best cell by its seed mean)
  and its law and interval the report's (``recipe_asymptote``: A / N^B + E, a t-interval);
- its multiplier is Kim's at that budget, D_eff(E_U) / D_eff(L_ref(U)), with L_ref(U) the
  reference recipe's best observed loss at U (the data law's point at U; at the base budget
  this is the report's 1x) and D_eff the reference's data law in U
  (``data_multiplier.data_multiplier``, its bootstrap CI and refusals).

A budget whose law is not identified keeps its reason and gets no multiplier; a budget with
no reference run gets its asymptote and the reason there is no multiplier.

Pure polars/numpy: one table, one row per (recipe, U).
"""

from __future__ import annotations

import math
from collections.abc import Mapping

import polars as pl

from analysis.fit.identified import MIN_SIZES
from analysis.recipes.cells import size_points
from analysis.recipes.data_multiplier import DataLaw, data_multiplier
from analysis.recipes.recipe_asymptote import RecipeE, recipe_asymptote
from analysis.tables.cells import best_cells

__all__ = ["SCHEMA", "budget_asymptotes", "budget_lines"]

SCHEMA = {"recipe": pl.String, "U": pl.Float64, "sizes": pl.Int64, "E": pl.Float64,
          "lo": pl.Float64, "hi": pl.Float64, "why": pl.String, "ref_loss": pl.Float64,
          "multiplier": pl.Float64, "m_lo": pl.Float64, "m_hi": pl.Float64,
          "m_why": pl.String}
"""recipe, U (unique tokens), sizes (N with runs at U), E, lo, hi (95% CI; nan when ``why``),
why (E not written: the reason), ref_loss (the reference's best loss at U; nan: none),
multiplier, m_lo, m_hi (its 95% CI), m_why (no multiplier: the reason)."""


def budget_asymptotes(tagged: dict[str, pl.DataFrame], cols: list[str], data_points: pl.DataFrame,
                      law: DataLaw | str, reference: str,
                      known: Mapping[tuple[str, float], RecipeE] | None = None) -> pl.DataFrame:
    """One row per (recipe, budget U) of every non-reference recipe with runs at >= 2
    budgets (module docstring). ``tagged``: recipe -> its COMPLETED runs (N, U, loss and the
    cell columns ``cols``); ``data_points``: U, loss (the reference's best per budget);
    ``law``: the reference's data law, or why there is none; ``known``: (recipe, U) -> the
    fit of those best cells already made (the analysis' at its base budget), not refitted."""
    known = known or {}
    ref_at = dict(zip(data_points["U"].to_list(), data_points["loss"].to_list()))
    ref_runs = tagged.get(reference, pl.DataFrame())
    rows = []
    for recipe, frame in tagged.items():
        budgets = _own_budgets(frame, ref_runs) if recipe != reference else []
        if len(budgets) < 2:
            continue
        for u in budgets:
            cell_rows, cells = best_cells(frame.filter(pl.col("U") == u), cols)
            sizes = cells.height
            if sizes < MIN_SIZES:
                continue
            asym = known.get((recipe, float(u))) or recipe_asymptote(size_points(cell_rows))
            ref = float(ref_at.get(u, math.nan))
            m = (math.nan,) * 3
            if asym.why_not is not None:
                m_why = "the asymptote is not identified"
            elif isinstance(law, str):
                m_why = law
            elif not math.isfinite(ref):
                m_why = f"no run of the {reference} recipe at U = {u:,.0f}"
            else:
                mult = data_multiplier(law, asym.E, asym.fit.e_se_t(), ref)
                m_why = None if mult.identified else mult.why
                if mult.identified:
                    m = (mult.value, mult.lo, mult.hi)
            rows.append((recipe, float(u), sizes, asym.E, asym.lo, asym.hi, asym.why_not, ref, *m, m_why))
    return pl.DataFrame(rows, schema=SCHEMA, orient="row")


def _own_budgets(frame: pl.DataFrame, ref_runs: pl.DataFrame) -> list[float]:
    """The budgets at which ``frame`` has runs of its own, i.e. not only runs of the
    reference recipe (Kim's regularized recipe is the best over all tuned cells, the
    standard ones included: at a budget with standard runs only it is the standard recipe).
    Runs are told apart by run_id, else name, else all their columns."""
    key = next((c for c in ("run_id", "name") if c in frame.columns), None)
    out = []
    for u in sorted(set(frame["U"].to_list())):
        mine = frame.filter(pl.col("U") == u)
        if ref_runs.height and "U" in ref_runs.columns:
            ref = ref_runs.filter(pl.col("U") == u)
            if key is not None and key in ref.columns:
                mine = mine.filter(~pl.col(key).is_in(ref[key].implode()))
            elif set(ref.columns) == set(mine.columns):
                mine = mine.join(ref.select(mine.columns), on=mine.columns, how="anti", nulls_equal=True)
        if mine.height:
            out.append(u)
    return out


def budget_lines(table: pl.DataFrame, reference: str) -> list[str]:
    """The report's lines: per recipe and budget, E with its CI and the multiplier, then
    whether the multiplier grows, holds or shrinks with U where >= 2 are identified (by
    their intervals: 'holds' when neighbouring budgets' CIs overlap)."""
    lines = []
    for (recipe,), sub in table.group_by("recipe", maintain_order=True):
        for r in sub.sort("U").iter_rows(named=True):
            head = f"{recipe}  U = {r['U']:,.0f}  ({r['sizes']} sizes): "
            if r["why"] is not None:
                lines.append(head + f"asymptote {r['why']}")
                continue
            ref = (f"{reference}'s best {r['ref_loss']:.4f}" if math.isfinite(r["ref_loss"])
                   else f"no {reference} run")
            mult = (f"x{r['multiplier']:.2f} (95% CI x{r['m_lo']:.2f} .. x{r['m_hi']:.2f})"
                    if r["m_why"] is None else f"no multiplier: {r['m_why']}")
            lines.append(head + f"E = {r['E']:.4f}  95% CI ({r['lo']:.4f}, {r['hi']:.4f}); "
                         f"{ref}; {mult}")
        if trend := _trend(sub):
            lines.append(f"{recipe}: {trend}")
    return lines


def _trend(sub: pl.DataFrame) -> str | None:
    """'the multiplier holds from U = a to U = b (x.. -> x..)' / 'grows' / 'shrinks', judged
    between the smallest and largest budgets with a multiplier: 'grows' or 'shrinks' only
    when their CIs do not overlap; then whether every budget's interval lies above x1 (the
    gain persists) or which budgets' reach it."""
    ok = sub.filter(pl.col("m_why").is_null()).sort("U")
    if ok.height < 2:
        return None
    a, b = ok.row(0, named=True), ok.row(-1, named=True)
    if b["m_lo"] > a["m_hi"]:
        word = "grows"
    elif b["m_hi"] < a["m_lo"]:
        word = "shrinks"
    else:
        word = "holds (the intervals overlap)"
    at_one = ok.filter(pl.col("m_lo") <= 1.0)["U"].to_list()
    persists = ("the gain persists: every budget's interval lies above x1" if not at_one else
                "no gain shown at U = " + ", ".join(f"{u:,.0f}" for u in at_one) + " (its interval reaches x1)")
    return (f"the multiplier {word} from U = {a['U']:,.0f} to U = {b['U']:,.0f} "
            f"(x{a['multiplier']:.2f} -> x{b['multiplier']:.2f}); {persists}")
