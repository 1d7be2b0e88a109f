"""Launch order: the most costly runs go to the backend first (Graham's LPT rule)."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent))
from lifecycle_helpers import FAKE, plan_of, write_spec

from scalelab.sweep.run.backends.debug import DebugBackend
from scalelab.sweep.run.launch import execute
from scalelab.sweep.run.order import STEP_OVERHEAD_FLOPS, longest_first


def test_longest_first_orders_by_steps_and_flops():
    steps = [100, 400, 100, 100, None]
    flops = [1e12, 0.0, 5e11, float("nan"), 1e9]
    # costs: 1.1e11 + 1e12, 4.4e11, 1.1e11 + 5e11, 1.1e11, 1e9
    assert longest_first(steps, flops) == [0, 2, 1, 3, 4]
    assert longest_first([10, 10, 10], [0, 0, 0]) == [0, 1, 2]  # ties keep plan order
    assert longest_first([], []) == []
    with pytest.raises(ValueError, match="differ in length"):
        longest_first([1], [])
    # the overhead term alone orders runs of equal FLOPs by steps
    assert longest_first([1, 2], [STEP_OVERHEAD_FLOPS, 0.0]) == [0, 1]  # 2 x overhead each: tie
    assert longest_first([1, 3], [STEP_OVERHEAD_FLOPS, 0.0]) == [1, 0]


class _Recording(DebugBackend):
    def __init__(self):
        super().__init__()
        self.order: list[str] = []

    def submit(self, jobs, launcher=None):
        self.order += [j.run_id for j in jobs]
        return super().submit(jobs, launcher)


def test_launch_submits_the_largest_runs_first(tmp_path):
    base = {"model": {"preset": "cpu-50k"}, "data": {"vocab_size": 256, "unique_tokens": 1024,
                                                     "seq_len": 16}, "extra": {"fake_steps": 2}}
    grid = {"model.preset": ["cpu-10k", "cpu-250k", "cpu-50k"], "data.epochs": [1, 4]}
    plan = plan_of(write_spec(tmp_path / "s.yaml", "s", base=json.loads(json.dumps(base)),
                              grid=grid))
    backend = _Recording()
    execute(plan, tmp_path / "sw", plan.spec.launcher, wait=True, backend=backend, target=FAKE)
    table = plan.table
    cost = {r: s * STEP_OVERHEAD_FLOPS + f
            for r, s, f in zip(table["run_id"], table["steps"], table["flops"])}
    got = [cost[r] for r in backend.order]
    assert len(got) == 6 and got == sorted(got, reverse=True)
    assert backend.order != table["run_id"].to_list()  # plan order was not already sorted
