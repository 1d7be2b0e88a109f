"""Which ensemble groups of ``<sweep>/ensembles/evals.parquet`` the recipe analysis uses.

An evals file holds one group per set of runs that differ only in their member index
(``scalelab.ensemble``), including groups left by an older version of the spec whose runs
are still in the sweep directory, and possibly several ensemble cells of one size. The
analysis needs one K-curve per size N:

1. groups with a member run outside the sweep's runs table (``scalelab collect``: the runs
   of the current plan) are dropped;
2. of the groups left at one N, the best ensemble is kept: the lowest loss at its largest
   K (most members first), as a tuned recipe keeps its best cell.

Pure polars; rows are matched by the group id (the evals' ``run_id`` column).
"""

from __future__ import annotations

import polars as pl

__all__ = ["pick_groups"]


def pick_groups(ensembles: pl.DataFrame, run_ids: pl.Series | None,
                notes: list[str]) -> pl.DataFrame:
    """The rows of ``ensembles`` of one group per N (see the module docstring)."""
    if "run_id" not in ensembles.columns:
        return ensembles  # one anonymous group per N (hand-made tables)
    has_ids = "member_run_ids" in ensembles.columns
    ids_col = pl.col("member_run_ids").first() if has_ids else pl.lit(None).alias("member_run_ids")
    groups = ensembles.group_by("run_id").agg(ids_col)
    if run_ids is not None and has_ids:
        known = set(run_ids.cast(pl.String).to_list())
        stale = [g for g, ids in zip(groups["run_id"], groups["member_run_ids"])
                 if ids is not None and not set(ids.split(",")) <= known]
        if stale:
            notes.append(f"{len(stale)} ensemble group(s) with runs outside this sweep's "
                         "runs table (an older spec's) left out")
            groups = groups.filter(~pl.col("run_id").is_in(stale))
    kept = groups["run_id"].to_list()
    logits = ensembles.filter((pl.col("method") == "logits") & pl.col("run_id").is_in(kept))
    by_k = logits.sort("members", descending=True)
    largest_k = by_k.group_by("run_id", maintain_order=True).first()
    top = (largest_k.sort(["members", "loss"], descending=[True, False])
           .group_by("N", maintain_order=True).first())
    if (extra := groups.height - top.height) > 0:
        notes.append(f"{extra} more ensemble group(s) at a size that has a better one left out "
                     "(per N the lowest loss at the most members is kept)")
    return ensembles.filter(pl.col("run_id").is_in(top["run_id"].to_list()))
