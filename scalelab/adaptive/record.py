"""What an adaptive study leaves in its sweep directory, so that it can be audited:

    <sweep>/adaptive/study.yaml            the study's spec (``source`` reads it back)
    <sweep>/adaptive/round-001.parquet     round 1's candidate table and scores, ...
    <sweep>/adaptive/trajectory.parquet    one row per look at the target
    <sweep>/adaptive/next.yaml             ``scalelab next``'s block (default -o)

Round 0 is the seed design (action ``seed``). A later round file is
``analysis.adaptive.Plan.table`` (every pending candidate: key, N, the
tuned axes, replicate, action, action_cost, gain, score, selected, rank), with the run id
and name of each candidate, its ``cost`` in ``unit``, and the state before the round:
``target`` (its name), ``value``, ``lo``, ``hi``, ``width`` (the target's summary,
``analysis.adaptive.targets``: E, a ranking's deciding Delta E or a multiplier; inf
without an interval),
``predicted_width`` (the planning model's), ``spent`` and ``budget_left``. The trajectory
has round (0: the seed design), runs (finished), spent, unit, sizes (settled), value, lo,
hi, width, decided, target, stopped (why the loop ended, on its last row).

Every file but ``next.yaml`` (a spec the user launches) is written atomically with its
manifest (``scalelab.store.sweep_files``; ``analysis.tables.sweep_manifest``): the study and
the trajectory are read back (``scalelab.adaptive.source``, ``membership``,
``append_trajectory``) checked against it, so a damaged one is a one-line error naming the
file and what to do, never a silently changed study or a trajectory extended from damaged
rows. Rounds are numbered on from the last one on disk, so a resumed study appends to its
record.
"""

from __future__ import annotations

import re
from pathlib import Path

import polars as pl

from analysis.adaptive import trajectory as traj
from analysis.adaptive.targets import Summary
from scalelab.adaptive.study import Study
from scalelab.store.layout import (
    ADAPTIVE_FOLDER,
    ADAPTIVE_NEXT_FILE,
    ADAPTIVE_STUDY_FILE,
    ADAPTIVE_TRAJECTORY_FILE,
    adaptive_round_file,
)
from scalelab.store.sweep_files import read_sweep_file, write_sweep_bytes, write_sweep_table

__all__ = ["ADAPTIVE_DIR", "NEXT_FILE", "STUDY_FILE", "TRAJECTORY_FILE", "append_trajectory",
           "next_round", "remember_study", "round_frame", "round_path", "seed_table", "write_round"]

ADAPTIVE_DIR = ADAPTIVE_FOLDER
STUDY_FILE = ADAPTIVE_STUDY_FILE
NEXT_FILE = ADAPTIVE_NEXT_FILE
TRAJECTORY_FILE = ADAPTIVE_TRAJECTORY_FILE
_ROUND_RE = re.compile(r"round-(\d+)\.parquet")
round_path = adaptive_round_file


def _folder(sweep_dir: str | Path) -> Path:
    folder = Path(sweep_dir) / ADAPTIVE_DIR
    folder.mkdir(parents=True, exist_ok=True)
    return folder


def next_round(sweep_dir: str | Path) -> int:
    """1 + the highest round on disk (1 for none)."""
    folder = Path(sweep_dir) / ADAPTIVE_DIR
    found = [int(m.group(1)) for p in (folder.iterdir() if folder.is_dir() else ())
             if (m := _ROUND_RE.fullmatch(p.name))]
    return max(found, default=0) + 1


def seed_table(seed: pl.DataFrame) -> pl.DataFrame:
    """Round 0's table: the seed design's runs, action 'seed', selected, in launch order
    (no score: nothing is fitted before them)."""
    return seed.with_columns(
        pl.lit("seed").alias("action"), pl.lit(float(seed["flops"].sum())).alias("action_cost"),
        pl.lit(None, dtype=pl.Float64).alias("gain"), pl.lit(None, dtype=pl.Float64).alias("score"),
        pl.lit(True).alias("selected"), pl.int_range(seed.height, dtype=pl.Int64).alias("rank"))


def round_frame(index: int, table: pl.DataFrame, predicted_width: float, study: Study,
                summary: Summary, spent: float, budget: float) -> pl.DataFrame:
    """The round's record (module docstring) from its candidate ``table``
    (``analysis.adaptive.Plan.table`` and ``Plan.width``, or ``seed_table``)."""
    ids = study.candidates.select("key", "run_id", "name")
    return (table.join(ids, on="key", how="left")
            .rename({"flops": "cost"})
            .with_columns(pl.lit(index).alias("round"), pl.lit(study.unit).alias("unit"),
                          pl.lit(summary.name).alias("target"),
                          pl.lit(summary.value).alias("value"),
                          pl.lit(summary.lo).alias("lo"), pl.lit(summary.hi).alias("hi"),
                          pl.lit(summary.width).alias("width"),
                          pl.lit(predicted_width).alias("predicted_width"),
                          pl.lit(spent).alias("spent"),
                          pl.lit(budget - spent).alias("budget_left")))


def write_round(sweep_dir: str | Path, index: int, frame: pl.DataFrame) -> Path:
    _folder(sweep_dir)
    return write_sweep_table(round_path(sweep_dir, index), frame)


def append_trajectory(sweep_dir: str | Path, index: int, runs: int, spent: float, unit: str,
                      summary: Summary, sizes: int, stopped: str | None = None) -> Path:
    """Add one row (``analysis.adaptive.trajectory.row``, step = round, flops = spent); the
    rows on disk are read back checked against their manifest (a damaged trajectory is a
    one-line ``UserError``, never extended)."""
    path = _folder(sweep_dir) / TRAJECTORY_FILE
    row = pl.DataFrame([traj.row(index, runs, spent, summary, sizes)], schema=traj.SCHEMA)
    row = row.rename({"step": "round", "flops": "spent"}).with_columns(
        pl.lit(summary.name).alias("target"), pl.lit(unit).alias("unit"),
        pl.lit(stopped, dtype=pl.String).alias("stopped"))
    if path.exists():
        row = pl.concat([read_sweep_file(path), row], how="diagonal_relaxed")
    return write_sweep_table(path, row)


def remember_study(sweep_dir: str | Path, study: Study) -> Path:
    """Keep the study's spec as ``<sweep>/adaptive/study.yaml``, with its manifest."""
    return write_sweep_bytes(_folder(sweep_dir) / STUDY_FILE, study.spec.text.encode())
