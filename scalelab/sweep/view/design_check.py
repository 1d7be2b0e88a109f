"""Can the planned runs answer? The design check of ``scalelab sweep SPEC --dry-run`` (and
one short block before a real launch): every recipe or block whose law the report will not
identify from the plan, what to add and what it costs (runs, and GPU-hours from the plan's
own ``gpu_hours`` column; FLOPs where the spec gives no throughput).

Rules, each read from the module that applies it to the finished runs:

- **sizes** of a recipe's law L(N) = A / N^B + E: ``analysis.fit.identified.MIN_SIZES`` (5)
  distinct N before its asymptote is written with an interval (two residual degrees of
  freedom; the measured reason is in that docstring). At MIN_SIZES - 1 (4) E rests on one
  residual degree of freedom: the report prints it with a flagged 1-dof t interval
  (t_0.975 = 12.71); a fifth size gives 2 (t 4.30: ~3x narrower at the same scatter). Below
  4 sizes (3 parameters on 3 points interpolate) E is not identified. Recipes are the
  report's (``analysis.recipes.rows.find_recipes`` on the plan with its ``recipe`` column:
  ``extra.recipe`` wherever the spec sets it), else each block is its own recipe.
- **budgets** of the data law L(U) = A / U^B + C (block ``data``,
  ``analysis.recipes.infinite_compute.Blocks``): its points are the reference recipe's and
  the data block's budgets U (``data.unique_tokens``); ``data_multiplier.choose_data_law``
  needs >= 3 distinct budgets, and 4 to test the floor C.
- **hp values per size** of a transfer law (``analysis.transfer.optimum``): where a block
  sweeps an hp per size (a grid of sizes and an lr, wd, batch ... axis), each size's optimum
  is a quadratic in log hp around the best cell: >= 3 values at every size.
- **replicate seeds** (``analysis.recipes.replicates``): with two or more recipes, a verdict
  on a recipe whose loss rises with N holds it to its best loss minus 2 sigma, and sigma is
  the SD between runs of one cell (``cells.cell_columns``) that differ only by seed or
  member; with none it falls back to the scatter around a curve.

Costs: one more size is the recipe's blocks' runs at the edge size, the cost scaled by N
(compute ~ 6 N D at the same tokens); a budget the data block's runs at its largest U scaled
by U; an hp value one value's share of the size's runs. Estimates, marked ~.

Pure polars on the plan table: a few ``group_by``s, no loop over runs (the per-block
constants are read from one config per block), fast on a 1e7-run plan.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import polars as pl

__all__ = ["Finding", "block_constants", "check", "check_plan", "launch_lines", "lines"]

OK, WEAK, NOT_IDENTIFIED = "ok", "weak", "not identified"
_NOT_HP = ("model.", "extra.", "distill.", "data.unique_tokens", "data.dataset")
"""Axis prefixes that are not hyperparameters of a transfer law (sizes, tags, budgets)."""
_T_INTERVAL = 0.975
_TRANSFER_HPS = ("optim.lr", "optim.weight_decay", "train.batch_size")
"""The hps of docs/transfer.md's laws: a grid of 2 of them per size is meant as a transfer sweep."""


@dataclass(frozen=True)
class Finding:
    """One line of the check: ``level`` (ok, weak, not identified), what it is about and why."""

    level: str
    subject: str
    text: str

    def line(self) -> str:
        return f"{self.level:<14} {self.subject}: {self.text}"


def block_constants(table: pl.DataFrame, configs: Sequence[Any]) -> pl.DataFrame:
    """Per block (or the one plan without blocks): its ``extra.recipe``, unique tokens U,
    whether it distills and its ensemble member count, read from the block's first config
    (these are constant within a block unless an axis sets them: the table's column wins)."""
    has_block = "block" in table.columns
    firsts = (table.with_row_index("_i").group_by("block", maintain_order=True).agg(pl.col("_i").first())
              if has_block
              else pl.DataFrame({"block": [None], "_i": [0]}, schema={"block": pl.String, "_i": pl.UInt32}))
    rows = []
    for block, i in firsts.iter_rows():
        cfg = configs[int(i)] if configs else None
        extra = getattr(cfg, "extra", {}) or {}
        rows.append({"block": block, "_recipe": None if extra.get("recipe") is None else str(extra["recipe"]),
                     "_U": getattr(getattr(cfg, "data", None), "unique_tokens", None),
                     "_student": bool(getattr(getattr(cfg, "distill", None), "active", False))})
    return pl.DataFrame(rows, schema={"block": pl.String, "_recipe": pl.String, "_U": pl.Int64,
                                      "_student": pl.Boolean})


def grids(spec: Any) -> dict[str, dict[str, int]]:
    """Block name ('' for a spec without blocks) -> its ``grid``'s keys and value counts (not
    its zips: a zip lists chosen cells, a grid sweeps every value at every size)."""
    def counts(s: Any) -> dict[str, int]:
        return {k: len(v) for k, v in (getattr(s, "grid", {}) or {}).items()}

    blocks = getattr(spec, "blocks", ()) or ()
    if not blocks:
        return {"": counts(spec)}
    return {name: counts(block) for name, block in blocks}


def check_plan(plan: Any) -> list[Finding]:
    """``check`` of a ``scalelab.sweep.plan.table.Plan``."""
    return check(plan.table, plan.axes, block_constants(plan.table, plan.configs), grids(plan.spec))


def check(table: pl.DataFrame, axes: Sequence[str], constants: pl.DataFrame | None = None,
          grid_keys: dict[str, dict[str, int]] | None = None) -> list[Finding]:
    """The findings of a plan table (``run_id``, ``N``, ``flops``, ``gpu_hours``, the axis
    columns; ``block`` when it has blocks); ``constants``: ``block_constants``; ``grid_keys``
    (``grids``): a block sweeps an hp per size for a transfer law when its grid crosses a
    ``model.*`` key with the hp, at >= 3 values or with an lr, wd or batch axis of 2 (None:
    when the hp takes >= 2 values at some size)."""
    from analysis.recipes.infinite_compute import Blocks

    if table.height == 0:
        return []
    runs = _prepared(table, constants)
    names = Blocks()
    cost = _Cost.of(runs)
    findings: list[Finding] = []
    swept = _swept(runs, axes, grid_keys)
    recipes, source = _recipes(runs, names)
    findings += _size_findings(runs, recipes, source, cost)
    if (runs["block"] == names.data).any():
        findings += _data_findings(runs, recipes, names.data, cost)
    findings += _ensemble_findings(runs, names, cost)
    findings += _transfer_findings(runs, swept, cost)
    if len(recipes) >= 2:
        findings += _replicate_findings(runs, recipes, cost)
    return findings


def lines(findings: Sequence[Finding], *, only_problems: bool = False, width: int = 100) -> list[str]:
    """The check as text, wrapped at ``width`` columns: a heading, one entry per weak or
    unidentified finding, then one naming what is ok (``only_problems``: not that; nothing
    but ok: a single entry)."""
    if not findings:
        return []
    problems = [f for f in findings if f.level != OK]
    fine = "; ".join(f"{f.subject} ({f.text})" for f in findings if f.level == OK)
    if not problems:
        return _wrap(f"design check: ok: {fine}", "  ", width)
    out = ["design check (can the planned runs identify each law? advisory):"]
    for f in problems:
        out += _wrap(f"  {f.line()}", " " * 17, width)
    if fine and not only_problems:
        out += _wrap(f"  {OK:<14} {fine}", " " * 17, width)
    return out


def _wrap(text: str, indent: str, width: int) -> list[str]:
    import textwrap

    return textwrap.wrap(text, width=width, subsequent_indent=indent, break_long_words=False,
                         break_on_hyphens=False) or [text]


def launch_lines(findings: Sequence[Finding]) -> list[str]:
    """The short block printed before a real launch: the problems only, and where to see all."""
    out = lines(findings, only_problems=True)
    if len(out) > 1:
        out.append("  (advisory: launching anyway; `--dry-run` shows the whole check)")
    return out


# ---------------------------------------------------------------------------------------
# The plan, prepared


def _prepared(table: pl.DataFrame, constants: pl.DataFrame | None) -> pl.DataFrame:
    """``table`` with ``block`` (the spec's name-less plan: ''), ``recipe`` (the
    ``extra.recipe`` axis, else the block's), ``U`` (``data.unique_tokens`` or the block's),
    ``student`` and ``cost`` (GPU-hours, else FLOPs)."""
    runs = table if "block" in table.columns else table.with_columns(pl.lit("").alias("block"))
    if constants is None:
        constants = pl.DataFrame(schema={"block": pl.String, "_recipe": pl.String, "_U": pl.Int64,
                                         "_student": pl.Boolean})
    constants = constants.with_columns(pl.col("block").fill_null(""))
    runs = runs.join(constants, on="block", how="left", maintain_order="left")
    recipe = pl.col("extra.recipe").cast(pl.String) if "extra.recipe" in runs.columns else pl.lit(None, pl.String)
    u = pl.col("data.unique_tokens").cast(pl.Int64) if "data.unique_tokens" in runs.columns else pl.lit(None, pl.Int64)
    return runs.with_columns(
        pl.coalesce(recipe, pl.col("_recipe")).alias("recipe"),
        pl.coalesce(u, pl.col("_U"), pl.col("D_unique").cast(pl.Int64)).alias("U"),
        pl.col("_student").fill_null(False).alias("student"),
    )


@dataclass(frozen=True)
class _Cost:
    """What a run costs: GPU-hours when the plan has them, else FLOPs."""

    column: str
    unit: str

    @classmethod
    def of(cls, runs: pl.DataFrame) -> _Cost:
        if "gpu_hours" in runs.columns and runs["gpu_hours"].null_count() < runs.height:
            return cls("gpu_hours", "GPU-hours")
        return cls("flops", "FLOPs")

    def text(self, value: float) -> str:
        if self.unit == "FLOPs":
            mantissa, exponent = f"{value:.1e}".split("e")
            return f"~{mantissa.rstrip('0').rstrip('.')}e{int(exponent)} FLOPs"
        return f"~{value:,.0f} {self.unit}" if value >= 10 else f"~{value:.2g} {self.unit}"

    def sum(self, frame: pl.DataFrame) -> float:
        return float(frame[self.column].fill_null(0).sum()) if frame.height else 0.0


def _recipes(runs: pl.DataFrame, names: Any) -> tuple[dict[str, pl.Expr], str]:
    """Recipe name -> predicate: the report's rule, else one recipe per block (data, ensemble
    and student blocks are not laws vs N)."""
    from analysis.recipes.rows import recipes_or_none

    found = recipes_or_none(runs)
    preds, source = (dict(found.predicates), "report") if found is not None else ({}, "blocks")
    covered = pl.any_horizontal(*preds.values()) if preds else pl.lit(False)
    other = {names.data, names.ensemble}
    left = (runs.filter(~covered & ~pl.col("student") & ~pl.col("block").is_in(list(other)))
            .group_by("block", maintain_order=True).len())
    members = _member_blocks(runs)
    for block in left["block"].to_list():
        if block in members:
            continue
        preds[f"block '{block}'" if block else "the plan"] = pl.col("block") == block
    return preds, source


def _member_blocks(runs: pl.DataFrame) -> set[str]:
    """Blocks that hold ensemble members (a ``member`` column with several values)."""
    if "member" not in runs.columns:
        return set()
    grouped = runs.group_by("block").agg(pl.col("member").n_unique().alias("k"))
    return set(grouped.filter(pl.col("k") > 1)["block"].to_list())


# ---------------------------------------------------------------------------------------
# Sizes


def _t(dof: int) -> float:
    from scipy import stats

    return float(stats.t.ppf(_T_INTERVAL, dof))


def _sizes_text(sizes: list[int]) -> str:
    from scalelab.sweep.view.render import human

    return ", ".join(human(n, 3) for n in sizes)


def _ladder(sizes: list[int]) -> float:
    """The ratio between neighbouring sizes (geometric mean; 2 with one size)."""
    if len(sizes) < 2:
        return 2.0
    return (sizes[-1] / sizes[0]) ** (1.0 / (len(sizes) - 1))


def _size_cost(runs: pl.DataFrame, blocks: list[str], edge: int, factors: list[float],
               cost: _Cost) -> tuple[int, float]:
    """Runs and cost of new sizes at ``factors`` x ``edge``: the blocks' runs at ``edge``,
    the cost scaled by N."""
    at_edge = runs.filter(pl.col("block").is_in(blocks) & (pl.col("N") == edge))
    return at_edge.height * len(factors), cost.sum(at_edge) * sum(factors)


def _size_findings(runs: pl.DataFrame, recipes: dict[str, pl.Expr], source: str,
                   cost: _Cost) -> list[Finding]:
    from analysis.fit.identified import MIN_SIZES
    from scalelab.sweep.view.render import human

    groups: dict[tuple, list[str]] = {}
    for name, pred in recipes.items():
        rows = runs.filter(pred)
        if rows.height == 0:
            continue
        sizes = tuple(sorted(rows["N"].unique().to_list()))
        blocks = tuple(rows["block"].unique(maintain_order=True).to_list())
        groups.setdefault((sizes, blocks), []).append(name)
    out = []
    for (sizes, blocks), names in groups.items():
        subject = _names(names)
        k, s = len(sizes), list(sizes)
        law = "A/N^B + E"
        if k >= MIN_SIZES:
            out.append(Finding(OK, subject, f"{k} sizes, E on {k - 3} residual dof"))
            continue
        need = MIN_SIZES - k
        r = _ladder(s)
        below = [r ** -(i + 1) for i in range(need)]
        above = [r ** (i + 1) for i in range(need)]
        n_lo, c_lo = _size_cost(runs, list(blocks), s[0], below, cost)
        n_hi, c_hi = _size_cost(runs, list(blocks), s[-1], above, cost)
        where = " and ".join(f"'{b}'" for b in blocks if b)
        where = f" to block{'s' * (len(blocks) > 1)} {where}" if where else ""
        add = (f"add {need} size{'s' * (need > 1)}{where}: below, N ~ "
               f"{', '.join(human(s[0] * f, 3) for f in below)} ({r:.2g}x steps down from "
               f"{human(s[0], 3)}): +{n_lo:,} runs, {cost.text(c_lo)}; or above, N ~ "
               f"{', '.join(human(s[-1] * f, 3) for f in above)}: +{n_hi:,} runs, {cost.text(c_hi)} "
               f"(cost scaled by N from the edge size's runs)")
        if k == MIN_SIZES - 1:
            t1, t2 = _t(1), _t(2)
            out.append(Finding(WEAK, subject, (
                f"{k} sizes ({_sizes_text(s)}): the asymptote E of {law} will rest on 1 residual "
                f"degree of freedom (3 parameters on 4 points); the report prints E with a flagged "
                f"1-dof t interval (t_0.975 = {t1:.2f}). A fifth size buys 2 residual dof "
                f"(t {t1:.2f} -> {t2:.2f}: an interval ~{t1 / t2:.0f}x narrower at the same "
                f"scatter) and the report's {MIN_SIZES}-size rule; {add}.")))
        else:
            why = ("3 parameters on 3 points interpolate: no residual, no interval" if k == 3
                   else f"{law} has 3 parameters")
            out.append(Finding(NOT_IDENTIFIED, subject, (
                f"{k} size{'s' * (k != 1)} ({_sizes_text(s)}): E is not identified ({why}; the "
                f"report needs >= {MIN_SIZES} sizes); {add}.")))
    if source == "blocks" and out:
        out.append(Finding(WEAK, "recipes", "no extra.recipe and no 'tuned' block: the report finds "
                                            "no recipes (set extra.recipe, or use --recipe); "
                                            "blocks checked as recipes"))
    return out


def _names(names: list[str]) -> str:
    """'recipe 'a'', 'recipes 'a', 'b'', or the block names as they are ('': the plan)."""
    if names == [""]:
        return "the plan"
    if names[0].startswith(("block ", "the plan")):
        return ", ".join(names)
    return ("recipe " if len(names) == 1 else "recipes ") + ", ".join(f"'{n}'" for n in names)


# ---------------------------------------------------------------------------------------
# Data law, ensembles, transfer, replicates


def _data_findings(runs: pl.DataFrame, recipes: dict[str, pl.Expr], data: str,
                   cost: _Cost) -> list[Finding]:
    from scalelab.sweep.view.render import human

    block = runs.filter(pl.col("block") == data)
    ref = "standard" if "standard" in recipes else next(iter(recipes), None)
    ref_rows = runs.filter(recipes[ref]) if ref is not None and ref in recipes else runs.clear()
    own = sorted(block["U"].drop_nulls().unique().to_list())
    budgets = sorted(set(own) | set(ref_rows["U"].drop_nulls().unique().to_list()))
    subject = f"block '{data}' (data law A/U^B + C)"
    listed = ", ".join(human(u, 3) for u in budgets)
    if len(budgets) >= 4:
        return [Finding(OK, subject, f"{len(budgets)} budgets U")]
    top = max(own) if own else max(budgets)
    at_top = block.filter(pl.col("U") == top)
    factors = [2.0 ** (i + 1) for i in range(4 - len(budgets))]
    add_runs, add_cost = at_top.height * len(factors), cost.sum(at_top) * sum(factors)
    add = (f"add U = {', '.join(human(top * f, 3) for f in factors)} to block '{data}' "
           f"(data.unique_tokens): +{add_runs:,} runs, {cost.text(add_cost)} (cost scaled by U "
           f"from its U = {human(top, 3)} runs)")
    mine = f"{len(own)} budget{'s' * (len(own) != 1)} of its own" + (f" with the {ref} recipe's" if ref else "")
    if len(budgets) < 3:
        return [Finding(NOT_IDENTIFIED, subject, (
            f"{len(budgets)} distinct budget{'s' * (len(budgets) != 1)} U ({listed}; {mine}): the "
            f"data law and its multipliers need >= 3 (4 to test the floor C); {add}."))]
    return [Finding(WEAK, subject, (
        f"3 budgets U ({listed}): the floor C cannot be tested (the pure law A/U^B is used: "
        f"the multiplier is then a lower bound); a 4th: {add}."))]


def _ensemble_findings(runs: pl.DataFrame, names: Any, cost: _Cost) -> list[Finding]:
    from analysis.fit.identified import MIN_SIZES

    members = _member_blocks(runs) | ({names.ensemble} & set(runs["block"].unique().to_list()))
    out = []
    for block in sorted(members):
        rows = runs.filter(pl.col("block") == block)
        sizes = sorted(rows["N"].unique().to_list())
        if len(sizes) >= MIN_SIZES:
            continue
        level = WEAK if len(sizes) == MIN_SIZES - 1 else NOT_IDENTIFIED
        note = ("on 1 residual degree of freedom" if level == WEAK
                else f"not identified (needs >= {MIN_SIZES} sizes)")
        out.append(Finding(level, f"block '{block}' (ensemble)", (
            f"{len(sizes)} size{'s' * (len(sizes) != 1)} ({_sizes_text(sizes)}): the ensemble's "
            f"K->inf asymptote vs N is {note}; members are compared with the recipes at "
            f"{'that size' if len(sizes) == 1 else 'these sizes'} only.")))
    return out


def _hps(runs: pl.DataFrame, axes: Sequence[str]) -> list[str]:
    """The axes that are hyperparameters (not sizes, tags, budgets, seeds)."""
    from analysis.tables.cells import SEED_COLUMNS  # the one list of seed keys

    return [a for a in dict.fromkeys(axes) if a in runs.columns and a not in (*SEED_COLUMNS, "block", "N")
            and not a.startswith(_NOT_HP)]


def _per_size(runs: pl.DataFrame, hps: list[str], cost_column: str) -> pl.DataFrame:
    """Per (block, N) of a block with >= 2 sizes: its runs, cost and each hp's value count."""
    per_size = runs.group_by("block", "N").agg(
        pl.len().alias("_runs"), pl.col(cost_column).fill_null(0).sum().alias("_cost"),
        *(pl.col(a).n_unique().alias(a) for a in hps))
    sizes = per_size.group_by("block").agg(pl.col("N").n_unique().alias("_sizes"))
    return per_size.join(sizes, on="block").filter(pl.col("_sizes") >= 2)


def _swept(runs: pl.DataFrame, axes: Sequence[str],
           grid_keys: dict[str, dict[str, int]] | None) -> dict[str, list[str]]:
    """hp -> the blocks (of >= 2 sizes) that sweep it per size: a grid of sizes and the hp
    (``grid_keys``: ``check``), else >= 2 values at some size."""
    hps = _hps(runs, axes)
    if not hps:
        return {}
    per_size = _per_size(runs, hps, "flops")
    out = {}
    for hp in hps:
        blocks = per_size.filter(pl.col(hp) >= 2)["block"].unique(maintain_order=True).to_list()
        if grid_keys is not None:
            blocks = [b for b in blocks if _grid_sweeps(grid_keys.get(b, {}), hp)]
        if blocks:
            out[hp] = blocks
    return out


def _grid_sweeps(grid: dict[str, int], hp: str) -> bool:
    """A grid of sizes and ``hp``: >= 3 values, or 2 of a transfer hp (lr, wd, batch)."""
    sizes = any(k.startswith("model.") and n >= 2 for k, n in grid.items())
    return sizes and (grid.get(hp, 0) >= 3 or (grid.get(hp, 0) == 2 and hp in _TRANSFER_HPS))


def _transfer_findings(runs: pl.DataFrame, swept: dict[str, list[str]], cost: _Cost) -> list[Finding]:
    if not swept:
        return []
    per_size = _per_size(runs, list(swept), cost.column)
    out = []
    for hp, blocks in swept.items():
        short = per_size.filter(pl.col("block").is_in(blocks) & (pl.col(hp) < 3)).sort("block", "N")
        for group in short.partition_by("block", maintain_order=True):
            block = group["block"][0]
            add_runs = group.select((pl.col("_runs") / pl.col(hp) * (3 - pl.col(hp))).sum()).item()
            add_cost = group.select((pl.col("_cost") / pl.col(hp) * (3 - pl.col(hp))).sum()).item()
            counts = sorted(set(group[hp].to_list()))
            out.append(Finding(NOT_IDENTIFIED, f"block '{block}' ({hp} transfer)", (
                f"{'/'.join(map(str, counts))} value(s) of {hp} at {group.height} size(s) "
                f"({_sizes_text(group['N'].to_list())}): a size's optimum (a quadratic in log {hp} "
                f"around the best) needs >= 3; add values on both sides of the expected optimum: "
                f"+{int(round(add_runs)):,} runs, {cost.text(add_cost)}.")))
    return out


def _replicate_findings(runs: pl.DataFrame, recipes: dict[str, pl.Expr], cost: _Cost) -> list[Finding]:
    from analysis.tables.cells import cell_columns

    cells = [c for c in cell_columns(runs) if c in runs.columns]
    groups = runs.group_by(cells).len().filter(pl.col("len") >= 2)
    if groups.height:
        return [Finding(OK, "sigma", f"replicate seeds in {groups.height} cell(s)")]
    first = next(iter(recipes))
    rows = runs.filter(recipes[first])
    cheapest = rows.sort(cost.column).group_by("N").first()
    return [Finding(WEAK, "sigma", (
        "no replicate seeds (no cell with >= 2 seeds or members): where a recipe's loss rises "
        "with N the verdict holds it to its best loss minus 2 sigma, and sigma will come from "
        "the scatter of its points around a curve (a fallback; on the demo twice the seed SD); "
        f"add a second seed of the cheapest cell at each size of {_names([first])} (a block "
        f"with seeds: [1]): +{cheapest.height:,} runs, {cost.text(cost.sum(cheapest))}."))]
