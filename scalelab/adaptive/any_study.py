"""Any sweep spec as the candidate space of ``scalelab next``: every run the spec plans, in
every block, grid and zip group, plus the replicate seeds it can add.

``study.load_study`` reads one grid (the ``tuned`` block laid out as Kim et al.'s product
of tuned axes) and walks it by coordinate search. Most studies are not one product: the
demo's ``tuned`` and ``tuned-best`` blocks are zip groups, one cell per size; a
Muon-vs-AdamW study is six blocks, one per optimizer and lr multiplier, with the lr derived
per size. This module takes such a spec as it is:

- candidates: every row of the spec's plan (``scalelab.sweep.plan.expand.expand``: the
  whole spec, with its ``block`` column and the config columns, those constant within a
  block such as ``extra.recipe`` and ``optim.name`` included), except the runs of blocks with
  ensemble ``members`` > 1 (an ensemble is no point of a scaling law);
- added replicates: ``EXTRA_SEEDS`` more seeds of every planned cell. A block with
  ``seeds: S`` gets ``S + [max S + 1, ...]``; a block without seeds gets ``seeds:
  [s0, s0 + 1, ...]`` with s0 its base seed, kept only when its planned runs keep their run
  ids (``seeds: [s0]`` is the same config as no seeds when ``train.init_seed`` and
  ``data.seed`` are both s0). Each added run is a row of the plan of the spec with those
  seeds (``added_tree``), so its run id is the one ``scalelab sweep`` gives it;
- a *cell* is a candidate's config apart from its seed (``analysis.tables.cells.
  cell_columns``: its block, every config column but the seed keys, N, D), the replicate
  its index among the cell's seeds (0 for a block without seeds);
- recipes: ``analysis.recipes.rows.find_recipes`` on the candidate table (the plan's config
  columns are the runs table's, ``extra.recipe`` as ``recipe``), the one owner of which
  runs belong to which recipe: ``--recipe NAME=COND[,...]`` (``block=adamw-x1|adamw-x3``
  joins blocks), else ``extra.recipe``, else Kim's ``tuned``/``tuned-*`` blocks (standard:
  weight decay 0.1; regularized: all of them), else one recipe per block.

The chosen runs are written (``any_block_spec``) as a spec with one block per block they come
from, ``adaptive-<block>``: that block's ``base``, ``derive`` and ``launcher`` and a
``zip`` of the chosen runs' values of its grid and zip keys (and seeds). The text is
checked to expand to exactly the chosen run ids (a RuntimeError otherwise: a bug).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import polars as pl
import yaml

from scalelab import yamlsafe
from scalelab.adaptive.block import BlockSpec, plain_value, written_spec
from scalelab.errors import UserError
from scalelab.sweep.plan.expand import expand
from scalelab.sweep.plan.table import Plan
from scalelab.sweep.spec.blocks import TOP_BLOCK
from scalelab.sweep.spec.load import Spec, parse_spec

__all__ = ["BLOCK_PREFIX", "EXTRA_SEEDS", "AnyStudy", "any_block_spec", "load_any_study"]

EXTRA_SEEDS = 2
"""Seeds a planned cell may get beyond those its block plans."""
BLOCK_PREFIX = "adaptive"
SEED_KEYS = ("train.init_seed", "data.seed")
BLOCK_KEYS = ("base", "derive", "launcher")
TOP_KEYS = ("name", "description", "base", "derive", "launcher")
GPU_HOURS, FLOPS = "gpu_hours", "flops"
UNITS = {GPU_HOURS: "GPU-hours", FLOPS: "FLOPs"}


@dataclass(frozen=True)
class AnyStudy:
    """The candidates of a whole spec, by recipe (module docstring)."""

    spec: Spec
    candidates: pl.DataFrame
    """One row per candidate run: key (= run_id), run_id, name, block, N, cell, replicate,
    planned, flops (the cost, in ``unit``) and the plan's config columns (``recipe`` for
    ``extra.recipe``)."""
    recipes: dict[str, pl.Expr]
    """Recipe -> its predicate over ``candidates`` (``find_recipes``)."""
    source: str
    """Where the recipes came from."""
    cost: str
    parts: dict[str | None, Spec]
    """Block name (None: a spec without blocks) -> its spec, as it plans."""
    trees: dict[str | None, dict]
    """Block name -> the raw YAML tree of the block, with the added seeds."""
    datasets: Mapping | None = None
    block: str | None = None
    """Never one block: ``scalelab.adaptive.record`` reads it."""

    @property
    def unit(self) -> str:
        return UNITS[self.cost]

    def recipe_frame(self, name: str) -> pl.DataFrame:
        """The candidates of recipe ``name``: key, N, cell, replicate, planned, flops."""
        return (self.candidates.filter(self.recipes[name])
                .select("key", "N", "cell", "replicate", "planned", "flops"))

    def run_ids(self, keys: Sequence[str]) -> list[str]:
        return list(keys)


def load_any_study(spec: Spec, *, datasets: Mapping | None = None,
                   filters: Mapping[str, Sequence[str]] | None = None) -> AnyStudy:
    """The study of the whole ``spec`` (module docstring); a UserError says why not."""
    from analysis.errors import AnalysisInputError
    from analysis.recipes.rows import find_recipes

    tree = yamlsafe.load(spec.text, file=spec.file)
    parts = _parts(spec)
    plan = expand(spec, datasets=datasets)
    grown, trees = _with_seeds(spec, tree, parts, plan, datasets)
    table = _candidates(plan, grown, parts)
    if table.height == 0:
        raise spec.error("no candidate runs: every block is an ensemble (members > 1)", "blocks")
    try:
        found = find_recipes(table, filters)
    except AnalysisInputError as err:
        raise UserError(str(err), key="--recipe" if filters else None) from None
    empty = [n for n, p in found.predicates.items() if table.filter(p).height == 0]
    if empty:
        raise UserError(f"recipe '{empty[0]}' has no run in the spec's plan (from {found.source})",
                        key="--recipe" if filters else None)
    cost = GPU_HOURS if table[GPU_HOURS].null_count() == 0 else FLOPS
    table = table.with_columns(pl.col(cost).cast(pl.Float64).alias("flops"))
    return AnyStudy(spec, table, dict(found.predicates), found.source, cost, parts, trees,
                    datasets)


def _parts(spec: Spec) -> dict[str | None, Spec]:
    """Block name -> its spec, in plan order (as ``expand_blocks`` splits the spec)."""
    if not spec.blocks:
        return {None: spec}
    parts: dict[str | None, Spec] = {}
    if spec.grid or spec.zip:
        parts[TOP_BLOCK] = dataclasses.replace(spec, blocks=())
    parts.update(dict(spec.blocks))
    return parts


def _block_tree(tree: dict, name: str | None) -> dict:
    """The raw YAML of block ``name`` (the top level for None or the top level's grid)."""
    if name is None or (name == TOP_BLOCK and not any(
            b.get("name") == TOP_BLOCK for b in tree.get("blocks") or ())):
        return {k: tree[k] for k in ("base", "derive", "launcher", "grid", "zip", "seeds")
                if tree.get(k) is not None}
    return next(b for b in tree.get("blocks") or () if b.get("name") == name)


def _seeds_of(part: Spec) -> list[int] | None:
    """The block's seeds with EXTRA_SEEDS more (None: it cannot get more)."""
    if part.members > 1:
        return None
    if part.seeds is not None:
        top = max(part.seeds)
        return [*part.seeds, *range(top + 1, top + 1 + EXTRA_SEEDS)]
    s0 = part.base.train.init_seed
    if part.base.data.seed != s0:
        return None
    return list(range(s0, s0 + 1 + EXTRA_SEEDS))


def _with_seeds(spec: Spec, tree: dict, parts: dict, plan: Plan, datasets
                ) -> tuple[Plan | None, dict]:
    """The plan of ``spec`` with every block's added seeds (None: no block may get more),
    and each block's raw tree as it plans there."""
    trees = {name: dict(_block_tree(tree, name)) for name in parts}
    grown = yamlsafe.load(spec.text, file=spec.file)
    own = {b.get("name"): b for b in grown.get("blocks") or ()}
    keep: dict = {}
    for name, part in parts.items():
        seeds = _seeds_of(part)
        if seeds is None or (name is not None and name not in own):
            continue  # (the top level's grid in a spec with blocks: its seeds reach every block)
        keep[name] = seeds
        (grown if name is None else own[name])["seeds"] = seeds
    if not keep:
        return None, trees
    try:
        more = expand(parse_spec(yaml.safe_dump(grown, sort_keys=False), file=spec.file),
                      datasets=datasets)
    except UserError:
        return None, trees
    old = plan.table.select("run_id", "block" if "block" in plan.table.columns else pl.lit(None).alias("block"))
    have = set(more.table["run_id"].to_list())
    bad = set(old.filter(~pl.col("run_id").is_in(list(have)))["block"].to_list())
    if None in bad and not spec.blocks:
        return None, trees  # the spec's own runs change id with seeds: no more seeds
    for name, seeds in keep.items():
        if name not in bad:
            trees[name]["seeds"] = seeds
    if "block" in more.table.columns and bad:
        keep_rows = ~pl.col("block").is_in([b for b in bad if b is not None])
        more = dataclasses.replace(more, table=more.table.filter(keep_rows))
    return more, trees


def _candidates(plan: Plan, grown: Plan | None, parts: dict) -> pl.DataFrame:
    """The plan's rows and the added seeds' rows, with key, cell, replicate, planned."""
    from analysis.tables.cells import cell_columns

    planned = plan.table.with_columns(pl.lit(True).alias("planned"))
    if grown is not None:
        if "seed" in grown.table.columns:  # a planned run's seed where its block gets seeds
            seeds = grown.table.select("run_id", pl.col("seed").alias("_grown_seed"))
            planned = planned.join(seeds, on="run_id", how="left").with_columns(
                (pl.coalesce("seed", "_grown_seed") if "seed" in planned.columns
                 else pl.col("_grown_seed")).alias("seed")).drop("_grown_seed")
        new = grown.table.filter(~pl.col("run_id").is_in(planned["run_id"].to_list()))
        table = pl.concat([planned, new.with_columns(pl.lit(False).alias("planned"))],
                          how="diagonal_relaxed")
    else:
        table = planned
    if "block" not in table.columns:
        table = table.with_columns(pl.lit(None, dtype=pl.String).alias("block"))
    ensembles = [n for n, p in parts.items() if p.members > 1]
    if ensembles:
        table = table.filter(~pl.col("block").is_in(ensembles))
    if "extra.recipe" in table.columns:
        table = table.with_columns(pl.col("extra.recipe").cast(pl.String).alias("recipe"))
    elif (recipe := (next(iter(parts.values())).base.extra or {}).get("recipe")) is not None:
        table = table.with_columns(pl.lit(str(recipe)).alias("recipe"))  # the top-level base's
    cols = [c for c in cell_columns(table) if c != "block"]
    cell = pl.concat_str([pl.col("block").fill_null("")]
                         + [pl.col(c).cast(pl.String).fill_null("") for c in cols], separator="|")
    seed = pl.col("seed") if "seed" in table.columns else pl.lit(None, dtype=pl.Int64)
    table = table.with_columns(cell.alias("cell"), seed.alias("_seed"))
    table = table.with_columns(
        (pl.col("_seed").rank("dense").over("cell") - 1).fill_null(0).cast(pl.Int64).alias("replicate"),
        pl.col("run_id").alias("key"), pl.col("N").cast(pl.Float64))
    return table.drop("_seed")


def any_block_tree(study: AnyStudy, run_ids: Sequence[str]) -> dict:
    """The spec (a YAML tree) of the runs ``run_ids`` of ``study`` (module docstring)."""
    if not run_ids:
        raise ValueError("no runs to write")
    tree = yamlsafe.load(study.spec.text, file=study.spec.file)
    out = {k: tree[k] for k in TOP_KEYS if tree.get(k) is not None}
    table = study.candidates
    index = {rid: i for i, rid in enumerate(table["run_id"].to_list())}
    rows = table[[index[r] for r in run_ids]]
    blocks = []
    for (name,), group in rows.group_by("block", maintain_order=True):
        part, raw = study.parts[name], study.trees[name]
        block: dict = {"name": BLOCK_PREFIX if name is None else f"{BLOCK_PREFIX}-{name}"}
        if name is not None and not (name == TOP_BLOCK and (study.spec.grid or study.spec.zip)):
            block |= {k: raw[k] for k in BLOCK_KEYS if raw.get(k) is not None}
        keys = [*part.grid, *(k for g in part.zip for k in g)]
        values = {k: [plain_value(v) for v in group[k].to_list()] for k in keys}
        if raw.get("seeds") is not None:
            values |= {k: [int(s) for s in group["seed"].to_list()] for k in SEED_KEYS}
        if values:
            block["zip"] = [values]
        elif group.height > 1:
            raise RuntimeError(f"{group.height} runs of block {name} with no axis to tell them apart")
        blocks.append(block)
    out["blocks"] = blocks
    return out


def any_block_spec(study: AnyStudy, run_ids: Sequence[str]) -> BlockSpec:
    """``any_block_tree`` as YAML text and its plan, checked to expand to exactly ``run_ids``."""
    return written_spec(any_block_tree(study, run_ids), f"the study {study.spec.file}",
                        study.datasets, run_ids)
