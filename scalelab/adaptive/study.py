"""A sweep spec's grid as the candidate space of an adaptive study.

The study is one grid: the spec itself, or for a spec with ``blocks`` the block named
``tuned`` (``scalelab.sweep.spec.blocks.TOP_BLOCK``: Kim et al.'s tuning grid, or the top
level's own grid). Its plan (``scalelab.sweep.plan.grid.expand_grid``) is split into

- tuned axes: the coordinate axes of a ``tune: {method: coordinate}`` section that the
  grid varies (with ``tune.start`` as the search's start), else the grid keys among Kim et
  al.'s (``data.epochs``, ``optim.lr``, ``optim.weight_decay``); they must be ``grid``
  keys (a product), not ``zip`` groups;
- sizes: every other grid key and zip group, one size per model size N (``N`` column of
  the plan; two size cells with one N are refused);
- replicates: the spec's ``seeds`` (replicate r is seed ``seeds[r]``; without ``seeds``
  one replicate, the base seeds). Ensemble ``members`` are refused.

Each plan row is one candidate of ``analysis.adaptive.CandidateSpace`` (its ``run_key``),
with the run id the sweep gives it and its cost: GPU-hours (the plan's ``gpu_hours``) when
the launcher prices every run (``flops_per_gpu_s`` or ``throughput_tokens_per_gpu_s``), else
FLOPs (6ND). The planner scores gain per unit of that cost.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import polars as pl

from analysis.adaptive import Axis, CandidateSpace, run_key
from scalelab.errors import did_you_mean
from scalelab.sweep.plan.grid import expand_grid
from scalelab.sweep.plan.table import Plan
from scalelab.sweep.spec.blocks import TOP_BLOCK
from scalelab.sweep.spec.load import Spec
from scalelab.sweep.spec.sections import KIM_AXES

__all__ = ["FLOPS", "GPU_HOURS", "Study", "load_study"]

GPU_HOURS = "gpu_hours"
FLOPS = "flops"
UNITS = {GPU_HOURS: "GPU-hours", FLOPS: "FLOPs"}
"""Cost column of the plan -> its unit as printed."""


@dataclass(frozen=True)
class Study:
    """The candidate space of one grid, and each candidate's run (module docstring)."""

    spec: Spec
    """The spec as loaded (top level)."""
    block: str | None
    """The block the study is (None: a spec without blocks)."""
    part: Spec
    """The spec whose grid the study is: ``spec`` or the block's."""
    plan: Plan
    """``part`` expanded (run ids as the sweep gives them)."""
    space: CandidateSpace
    candidates: pl.DataFrame
    """One row per plan row: key, N, <axes>, replicate, flops (the cost, in ``unit``;
    the planner's name for it), run_id, name, row (index into ``plan``)."""
    cost: str
    """The plan column costs come from: ``gpu_hours`` or ``flops``."""
    datasets: Mapping | None = None
    """The dataset facts ``plan`` was expanded with (``scalelab.sweep.plan.datasets``)."""

    @property
    def unit(self) -> str:
        return UNITS[self.cost]

    @property
    def axes(self) -> tuple[str, ...]:
        return self.space.names

    @property
    def columns(self) -> list[str]:
        """The run-frame columns of ``analysis.adaptive`` (key, N, axes, replicate, flops)."""
        return ["key", "N", *self.axes, "replicate", "flops"]

    def cost_of(self, frame: pl.DataFrame):
        """Cost (in ``unit``) of the candidates of ``frame`` (by ``key``): the ``flops``
        function ``analysis.adaptive`` takes."""
        table = dict(zip(self.candidates["key"].to_list(), self.candidates["flops"].to_list()))
        return [table[k] for k in frame["key"].to_list()]

    def run_ids(self, keys: Sequence[str]) -> list[str]:
        """The run ids of candidate ``keys``, in order."""
        table = dict(zip(self.candidates["key"].to_list(), self.candidates["run_id"].to_list()))
        return [table[k] for k in keys]


def load_study(spec: Spec, *, datasets: Mapping | None = None,
               block: str = TOP_BLOCK) -> Study:
    """The study of ``spec`` (module docstring); a UserError says what does not fit."""
    part, name = _part(spec, block)
    if part.members > 1:
        raise spec.error("an adaptive study needs members: 1 (seeds are its replicates)",
                         "members")
    axes = _tuned_axes(spec, part)
    plan = expand_grid(part, datasets)
    table = plan.table
    seeds = part.seeds or (None,)
    sizes = _sizes(spec, part, table, axes)
    ridge = spec.tune is not None and spec.tune.ridge
    space = CandidateSpace(sizes, tuple(_axis(spec, part, a) for a in axes), len(seeds), ridge=ridge)
    cost = GPU_HOURS if table[GPU_HOURS].null_count() == 0 else FLOPS
    rep = ([seeds.index(s) for s in table["seed"].to_list()] if part.seeds is not None
           else [0] * table.height)
    keys = [run_key(n, [float(v) for v in vals], axes, r) for n, vals, r in
            zip(table["N"].to_list(), zip(*(table[a].to_list() for a in axes)), rep)]
    candidates = pl.DataFrame({
        "key": keys, "N": table["N"].cast(pl.Float64),
        **{a: table[a].cast(pl.Float64) for a in axes},
        "replicate": pl.Series(rep, dtype=pl.Int64), "flops": table[cost].cast(pl.Float64),
        "run_id": table["run_id"], "name": table["name"],
        "row": pl.Series(range(table.height), dtype=pl.Int64),
    })
    return Study(spec, name, part, plan, space, candidates, cost, datasets)


def _part(spec: Spec, block: str) -> tuple[Spec, str | None]:
    """The spec of the study's grid and its block name (None without blocks)."""
    if not spec.blocks:
        return spec, None
    if block == TOP_BLOCK and (spec.grid or spec.zip):  # the top level's own grid
        return dataclasses.replace(spec, blocks=()), TOP_BLOCK
    found = dict(spec.blocks)
    if block not in found:
        raise spec.error(f"`sweep --adaptive` walks one grid, the block '{block}'; this spec's "
                         f"blocks are {sorted(found)}{did_you_mean(block, found)}: on any study, "
                         "run `scalelab next SWEEP` and launch the next.yaml it writes, each round",
                         "blocks")
    return found[block], block


def _tuned_axes(spec: Spec, part: Spec) -> tuple[str, ...]:
    """The coordinate axes of ``tune`` the grid varies, else its Kim axes."""
    coordinate = spec.tune is not None and spec.tune.method == "coordinate"
    wanted = spec.tune.axes if coordinate else KIM_AXES
    axes = tuple(a for a in wanted if a in part.grid)
    for group in part.zip:
        if zipped := [a for a in wanted if a in group]:
            raise spec.error(f"tuned axis '{zipped[0]}' is in a zip group; an adaptive study "
                             "needs the tuned axes as grid keys (a product)", "zip")
    if not axes:
        raise spec.error(f"no tuned axes: the grid varies none of {', '.join(wanted)} "
                         "(name them in tune.axes, method: coordinate)", "grid")
    return axes


def _axis(spec: Spec, part: Spec, key: str) -> Axis:
    values = tuple(sorted(float(v) for v in part.grid[key]))
    start = None
    if spec.tune is not None and key in spec.tune.start:
        start = values.index(float(spec.tune.start[key]))
    return Axis(key, values, start)


def _sizes(spec: Spec, part: Spec, table: pl.DataFrame, axes: Sequence[str]) -> tuple[float, ...]:
    """The model sizes N; every other grid key / zip group must pick out one N."""
    size_cols = [k for k in part.grid if k not in axes] + [k for g in part.zip for k in g]
    if size_cols:
        cells = table.group_by("N").agg(pl.struct(size_cols).n_unique().alias("cells"))
        if (shared := cells.filter(pl.col("cells") > 1)).height:
            n = shared["N"][0]
            raise spec.error(f"{shared['cells'][0]} cells of {', '.join(size_cols)} share "
                             f"N={n:,}: an adaptive study has one cell per model size", "grid")
    return tuple(sorted(float(n) for n in table["N"].unique().to_list()))
