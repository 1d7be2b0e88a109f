"""No wasted runs (issue 34): a run directory is named by the run's identity alone, so edits
that keep every run's identity (renaming blocks, moving a constant key between ``base`` and
a one-value axis, adding seeds) launch only the runs that are new; a run's directory named
the old way (``<run name>-<run id>``) is adopted when its ``config.yaml`` holds the run's
full id, and never otherwise.

A sweep of 2 blocks x 2 learning rates is finished once with the fake trainer (debug
backend, in this process); the edits are then judged by ``decide`` (plan vs disk), and one
relaunch goes end to end.
"""

from __future__ import annotations

import copy
import os
import sys
from pathlib import Path

import polars as pl
import pytest
import yaml

sys.path.insert(0, str(Path(__file__).resolve().parent))
from lifecycle_helpers import FAKE, plan_of

from scalelab.distill.resolve import teacher_dir
from scalelab.identity import full_id, run_dir_name
from scalelab.store.atomic import write_yaml_atomic
from scalelab.store.status import State, read_status, update_status
from scalelab.sweep.run.launch import decide, execute, plan_from_disk
from scalelab.sweep.view.status import sweep_states

BASE = {"model": {"preset": "cpu-50k"}, "data": {"vocab_size": 256, "unique_tokens": 1024, "seq_len": 16},
        "extra": {"fake_steps": 2}}
SPEC = {
    "name": "nw",
    "base": BASE,
    "launcher": {"executor": "debug"},
    "blocks": [
        {"name": "muon", "base": {"extra": {"recipe": "muon"}}, "grid": {"optim.lr": [1e-3, 2e-3]}},
        {"name": "adamw", "base": {"extra": {"recipe": "adamw"}}, "grid": {"optim.lr": [1e-3, 2e-3]}},
    ],
}


def _plan(tmp_path: Path, tree: dict, file: str = "spec.yaml"):
    path = tmp_path / file
    path.write_text(yaml.safe_dump(tree, sort_keys=False))
    return plan_of(path)


@pytest.fixture
def finished(tmp_path):
    """(the sweep directory, its plan): every run of ``SPEC`` COMPLETED."""
    plan = _plan(tmp_path, SPEC)
    sweep = tmp_path / "sw"
    report = execute(plan, sweep, plan.spec.launcher, wait=True, executor="debug", target=FAKE,
                     progress=False)
    assert len(report.launched) == 4 and set(report.results.values()) == {"COMPLETED"}
    return sweep, plan


def _launched(plan, sweep: Path) -> list[str]:
    decisions = decide(plan, sweep)
    return decisions.filter(pl.col("action") == "launch")["name"].to_list()


def _edited(edit) -> dict:
    tree = copy.deepcopy(SPEC)
    edit(tree)
    return tree


def test_renaming_every_block_launches_nothing(tmp_path, finished):
    sweep, before = finished

    def rename(tree):
        for block in tree["blocks"]:
            block["name"] = f"renamed-{block['name']}"

    plan = _plan(tmp_path, _edited(rename), "renamed.yaml")
    assert plan.table["name"].to_list() != before.table["name"].to_list()  # the names moved
    assert plan.table["run_dir"].to_list() == before.table["run_dir"].to_list()  # the dirs did not
    assert _launched(plan, sweep) == []
    # one relaunch end to end: nothing trains, every run is skipped as completed
    again = execute(plan, sweep, plan.spec.launcher, wait=True, executor="debug", target=FAKE,
                    progress=False)
    assert again.launched == [] and set(again.decisions["reason"]) == {"completed"}
    for d in plan.table["run_dir"]:
        assert len((sweep / d / "invocations.log").read_text().splitlines()) == 1


def test_moving_a_constant_key_into_a_one_value_axis_launches_nothing(tmp_path, finished):
    sweep, before = finished

    def move(tree):
        for block in tree["blocks"]:
            recipe = block["base"].pop("extra")["recipe"]
            block["grid"] = {"extra.recipe": [recipe], **block["grid"]}  # also a new axis order

    plan = _plan(tmp_path, _edited(move), "moved.yaml")
    assert sorted(plan.table["run_id"]) == sorted(before.table["run_id"])
    assert _launched(plan, sweep) == []


def test_adding_a_seed_launches_only_the_new_seed_runs(tmp_path, finished):
    sweep, before = finished

    def seeds(tree):
        tree["blocks"][0]["seeds"] = [0, 1]

    plan = _plan(tmp_path, _edited(seeds), "seeds.yaml")
    assert len(plan.table) == 6
    new = plan.table.filter(~pl.col("run_id").is_in(before.table["run_id"].to_list()))
    assert sorted(new["name"]) == ["muon_lr0.001_s1", "muon_lr0.002_s1"]
    assert sorted(_launched(plan, sweep)) == sorted(new["name"])


def test_seed_zero_of_a_seeds_list_is_the_run_without_one(tmp_path):
    """The seeds list sets train.init_seed and data.seed to the seed: with the defaults
    (both 0) seed 0 trains what the block without a seeds list trains, so it is that run;
    a base whose seed is not 0 trains differently under seed 0, so it is another run."""
    plain = _plan(tmp_path, SPEC)
    seeded = _plan(tmp_path, _edited(lambda t: t["blocks"][0].update(seeds=[0, 1])), "seeded.yaml")
    zero = seeded.table.filter(pl.col("seed") == 0)
    muon = plain.table.filter(pl.col("block") == "muon")
    assert zero.select("run_id", "run_dir").rows() == muon.select("run_id", "run_dir").rows()

    def seed_7(tree):
        tree["base"] = {**BASE, "train": {"init_seed": 7}}

    plain_7 = _plan(tmp_path, _edited(seed_7), "seed7.yaml")
    seeded_7 = _plan(tmp_path, _edited(lambda t: (seed_7(t), t["blocks"][0].update(seeds=[0, 1]))),
                     "seeded7.yaml")
    zero_7 = set(seeded_7.table.filter(pl.col("seed") == 0)["run_id"])
    assert not zero_7 & set(plain_7.table["run_id"])  # init seed 0, not 7: another training
    assert zero_7 == set(muon["run_id"])  # the training of init seed 0: that run


def _old_named(sweep: Path, plan) -> dict[str, str]:
    """Rename every run directory as scalelab named them before (``<run name>-<run id>``)
    with the ``config.yaml`` a started run holds; returns run id -> old directory."""
    old = {}
    for rid, name, d, cfg in zip(plan.table["run_id"], plan.table["name"], plan.table["run_dir"], plan.configs):
        target = f"runs/{name}-{rid}"
        os.rename(sweep / d, sweep / target)
        write_yaml_atomic(sweep / target / "config.yaml", {"run_id": rid, "run_id_full": full_id(cfg)})
        old[rid] = target
    (sweep / "plan.parquet").unlink()  # as if planned anew
    return old


def test_an_old_named_directory_of_an_unchanged_run_is_adopted(tmp_path, finished):
    sweep, plan = finished
    old = _old_named(sweep, plan)
    decisions = decide(plan, sweep)
    assert decisions["run_dir"].to_list() == [old[r] for r in plan.table["run_id"]]
    assert set(decisions["action"]) == {"skip"} and set(decisions["reason"]) == {"completed"}

    # one preempted: the relaunch resumes it in its old directory, trains nothing else
    preempted = sweep / old[plan.table["run_id"][0]]
    (preempted / "status.json").unlink()  # planted: a COMPLETED run never moves back
    update_status(preempted, State.PREEMPTED)
    report = execute(plan, sweep, plan.spec.launcher, wait=True, executor="debug", target=FAKE,
                     progress=False)
    assert report.launched == [plan.table["run_id"][0]]
    assert read_status(preempted)["state"] == "COMPLETED"
    assert not any((sweep / d).exists() for d in plan.table["run_dir"])  # no canonical dir made

    # status, collect (both read plan.parquet) and retry see the old directories
    states = sweep_states(sweep)
    assert states["run_dir"].to_list() == [old[r] for r in plan.table["run_id"]]
    assert set(states["state"]) == {"COMPLETED"}
    assert plan_from_disk(sweep).table["run_dir"].to_list() == states["run_dir"].to_list()

    # a distillation student names its teacher by the canonical directory: it resolves
    rid, canonical = plan.table["run_id"][1], plan.table["run_dir"][1]
    assert teacher_dir(sweep / "runs", canonical.removeprefix("runs/")) == sweep / old[rid]


def test_a_directory_of_another_identity_or_a_symlink_is_never_adopted(tmp_path, finished):
    sweep, plan = finished
    old = _old_named(sweep, plan)
    rids = plan.table["run_id"].to_list()
    # the run id's suffix, but another full id in config.yaml (a planted or colliding dir)
    write_yaml_atomic(sweep / old[rids[0]] / "config.yaml", {"run_id": rids[0], "run_id_full": rids[0] + "0" * 32})
    # no config.yaml, no config-input.yaml: holds no run
    (sweep / old[rids[1]] / "config-input.yaml").unlink()
    (sweep / old[rids[1]] / "config.yaml").unlink()
    # a symlink named for the run, to its real (renamed) directory
    hidden = sweep / "elsewhere"
    os.rename(sweep / old[rids[2]], hidden)
    os.symlink(hidden, sweep / old[rids[2]])
    decisions = decide(plan, sweep)
    canonical = plan.table["run_dir"].to_list()
    assert decisions["run_dir"].to_list()[:3] == canonical[:3]
    assert decisions["action"].to_list() == ["launch", "launch", "launch", "skip"]
    assert decisions["run_dir"][3] == old[rids[3]]
    assert teacher_dir(sweep / "runs", canonical[0].removeprefix("runs/")) == sweep / canonical[0]


def test_the_directory_name_is_a_function_of_the_identity(tmp_path):
    plan = _plan(tmp_path, SPEC)
    cfg = plan.configs[0]
    named = cfg.__class__(**{**cfg.__dict__, "name": "something_else"})
    assert run_dir_name(named) == run_dir_name(cfg) == plan.table["run_dir"][0].removeprefix("runs/")
    assert run_dir_name(cfg).startswith("cpu-50k_adamw-")
