"""A sweep's runs read against a study: what is done, what may still be proposed.

Input: the runs table ``scalelab collect`` writes (``run_id``, ``state`` and a loss column),
or None before anything ran. Every candidate of the study (``study.Study.candidates``)
falls in exactly one class, by its run id:

- done: COMPLETED with a finite, positive loss: the planner's finished runs (with ``loss``);
- launched, not usable: any other state the sweep knows (RUNNING, PENDING, PREEMPTED,
  TIMEOUT: in flight or resumable; FAILED, CANCELLED, DIVERGED: ended without a loss).
  Never proposed again: ``scalelab sweep`` resumes the first kind and ``retry`` reruns the
  second. A diverged or failed neighbour leaves its size unsettled (the planner sees no loss);
- pending: no state at all (never launched, or planned and never started): the only
  candidates ``plan_next`` may choose, so a run already done is never proposed.

``spent``: the cost of every launched candidate (done or not), in the study's unit.
"""

from __future__ import annotations

from dataclasses import dataclass

import polars as pl

from scalelab.adaptive.study import Study
from scalelab.errors import UserError, did_you_mean

__all__ = ["RESUMABLE", "Observed", "observe"]

RESUMABLE = ("RUNNING", "PENDING", "PREEMPTED", "TIMEOUT")
"""States of a launched run that a relaunch continues (``scalelab.sweep.run.launch``)."""


@dataclass(frozen=True)
class Observed:
    """The study's candidates split by what the sweep has done with them."""

    done: pl.DataFrame
    """Finished candidates: the candidate columns plus ``loss`` and ``state``."""
    pending: pl.DataFrame
    """Candidates never launched (the candidate columns)."""
    launched: pl.DataFrame
    """Every candidate with a state (done or not): the candidate columns plus ``state``."""

    @property
    def spent(self) -> float:
        """Cost of every launched candidate."""
        return float(self.launched["flops"].sum())

    @property
    def resumable(self) -> list[str]:
        """Run ids launched and not ended (a relaunch continues them)."""
        return self.launched.filter(pl.col("state").is_in(RESUMABLE))["run_id"].to_list()


def observe(study: Study, runs: pl.DataFrame | None, *, loss: str = "final_loss") -> Observed:
    """Split the study's candidates by the runs table ``runs`` (module docstring)."""
    cand = study.candidates
    if runs is None or runs.height == 0:
        states = pl.DataFrame(schema={"run_id": pl.String, "state": pl.String, "loss": pl.Float64})
    else:
        if loss not in runs.columns:
            raise UserError(f"the runs table has no loss column '{loss}'"
                            f"{did_you_mean(loss, runs.columns)}", key="--loss-column")
        if missing := {"run_id", "state"} - set(runs.columns):
            raise UserError(f"the runs table lacks {sorted(missing)} (run `scalelab collect`)")
        states = (runs.select("run_id", pl.col("state").cast(pl.String),
                              pl.col(loss).cast(pl.Float64).alias("loss"))
                  .filter(pl.col("state").is_not_null()).unique("run_id", keep="last"))
    joined = cand.join(states, on="run_id", how="left")
    launched = joined.filter(pl.col("state").is_not_null())
    ok = (pl.col("state") == "COMPLETED") & pl.col("loss").is_finite() & (pl.col("loss") > 0)
    done = launched.filter(ok)
    pending = cand.filter(~pl.col("run_id").is_in(launched["run_id"].to_list()))
    return Observed(done=done, pending=pending, launched=launched.drop("loss"))
