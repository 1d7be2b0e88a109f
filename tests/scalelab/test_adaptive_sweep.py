"""``run_adaptive_sweep`` (what ``scalelab sweep SPEC --adaptive --budget H`` runs) on the
debug backend, trained by ``adaptive_train:train``: a known law (E = 1.95) + a tuning
penalty + noise, over 8 twin sizes x 3 epochs x 3 weight decays x 3 seeds.

Asserted: the loop reaches a 0.15-wide CI on E within the grid's budget, for each of 3
noise seeds, making the decisions
``analysis.adaptive.run_adaptive`` makes in memory; it records every round; a second
invocation launches nothing; an interrupted study resumes to the same end; unfinished
runs are relaunched; the budget stops it. Against the grid (read in launch order, stopped as
soon as it meets the target: the grid's best case), measured with E's interval as the
report computes it (n - 3 residual dof): 44, 56, 68 runs against the grid's 53, 63, 63 for
noise seeds 0, 1, 2; fewer for seeds 0 and 1 and over the three together (168 vs 179), not
for seed 2. Under the earlier pooled interval (replicate scatter pooled in) it took 28, 36,
28 runs; the report's interval, which next must print, needs more sizes and so more runs.
"""

from __future__ import annotations

import math
import os
from pathlib import Path
from types import SimpleNamespace

import polars as pl
import pytest
from adaptive_train import law, spec_text

from analysis.adaptive import run_adaptive, seed_design
from analysis.adaptive.baselines import grid_order, run_fixed
from scalelab.adaptive.loop import run_adaptive_sweep
from scalelab.adaptive.study import load_study
from scalelab.errors import UserError
from scalelab.store.status import State, update_status
from scalelab.sweep.spec.load import load_spec

TARGET = "adaptive_train:train"
WIDTH = 0.15


def study(tmp_path: Path, noise_seed: int = 0):
    """(spec path, the study, the grid's budget in GPU-hours: every size x cell once)."""
    path = tmp_path / "study.yaml"
    path.write_text(spec_text("ad", seeds=(0, 1, 2), noise_seed=noise_seed))
    st = load_study(load_spec(path))
    grid = float(st.candidates.filter(pl.col("replicate") == 0)["flops"].sum())
    return path, st, grid


def adaptive(path: Path, root: Path, budget: float, **kw):
    return run_adaptive_sweep(path, budget, target_width=WIDTH, root=root, executor="debug",
                              target=TARGET, **kw)


def finished_keys(st, sweep: Path) -> set[str]:
    runs = pl.read_parquet(sweep / "runs.parquet").filter(pl.col("state") == "COMPLETED")
    done = st.candidates.filter(pl.col("run_id").is_in(runs["run_id"].to_list()))
    return set(done["key"].to_list())


def in_memory(st, noise_seed: int) -> set[str]:
    """The runs ``analysis.adaptive.run_adaptive`` trains on the same losses and costs."""
    priced = SimpleNamespace(flops=st.cost_of, train=law(noise_seed).train)
    memory = run_adaptive(priced, st.space, seed_design(st.space, st.cost_of), math.inf, WIDTH)
    return set(memory.runs["key"].to_list())


def invocations(sweep: Path) -> list[int]:
    return [len((d / "invocations.log").read_text().splitlines())
            for d in (sweep / "runs").iterdir()]


def grid_runs(st, noise_seed: int) -> int:
    """Runs the grid needs for the target, in launch order (``analysis.adaptive.run_fixed``)."""
    truth = law(noise_seed)
    return run_fixed(truth, st.space, grid_order(st.space, truth.flops), math.inf, WIDTH).runs.height


@pytest.mark.parametrize("noise_seed", [1, 2])
def test_reaches_the_target_with_fewer_runs_than_the_grid(tmp_path, noise_seed):
    """(noise seed 0: the next test.)"""
    path, st, budget = study(tmp_path, noise_seed)
    res = adaptive(path, tmp_path / "root", budget)
    assert res.stopped == "target" and res.fit.width <= WIDTH and res.spent <= budget
    assert res.unit == "GPU-hours" and len(res.launched) == res.runs
    assert res.runs <= MEASURED_RUNS[noise_seed] and grid_runs(st, noise_seed) <= 72
    if noise_seed != 2:  # seed 2: 68 against the grid's 63 (module docstring)
        assert res.runs < grid_runs(st, noise_seed)
    assert finished_keys(st, res.sweep_dir) == in_memory(st, noise_seed)


MEASURED_RUNS = {0: 44, 1: 56, 2: 68}
"""Runs to the target per noise seed (module docstring): a study is a function of its seed,
so more would be a change of the planner, not noise."""


def test_rounds_are_recorded_and_a_second_invocation_launches_nothing(tmp_path):
    path, st, budget = study(tmp_path)
    first = adaptive(path, tmp_path / "root", budget)
    assert first.stopped == "target" and first.runs < grid_runs(st, 0)
    sweep = first.sweep_dir
    files = sorted((sweep / "adaptive").glob("round-*.parquet"))
    rounds = [pl.read_parquet(f) for f in files]
    assert [f.name for f in files] == [f"round-{i:03d}.parquet" for i in range(len(files))]
    assert rounds[0]["action"].unique().to_list() == ["seed"] and rounds[0].height == 4
    earlier: set[str] = set()
    for r in rounds:
        chosen = r.filter(pl.col("selected")).sort("rank")["run_id"].to_list()
        assert not set(r["run_id"].to_list()) & earlier  # never a candidate once launched
        assert r["run_id"].null_count() == 0 and (r["unit"] == "GPU-hours").all()
        earlier |= set(chosen)
    assert len(earlier) == first.runs == len(invocations(sweep))
    columns = {"gain", "score", "value", "width", "predicted_width", "budget_left", "cost", "recipe"}
    assert columns <= set(rounds[1].columns)
    traj = pl.read_parquet(sweep / "adaptive" / "trajectory.parquet")
    assert traj["stopped"][-1] == "target" and traj["width"][-1] <= WIDTH
    assert traj["runs"].is_sorted() and traj["runs"][-1] == first.runs
    assert (sweep / "adaptive" / "study.yaml").read_text() == path.read_text()

    again = adaptive(path, tmp_path / "root", budget)
    assert again.launched == () and again.stopped == "target" and again.runs == first.runs
    assert sorted((sweep / "adaptive").glob("round-*.parquet")) == files
    assert invocations(sweep) == [1] * first.runs


def test_an_interrupted_study_resumes_to_the_same_end(tmp_path):
    path, st, budget = study(tmp_path)
    part = adaptive(path, tmp_path / "a", budget, max_rounds=2)
    assert part.stopped == "max_rounds" and part.rounds == 2
    rest = adaptive(path, tmp_path / "a", budget)
    assert rest.stopped == "target" and not set(rest.launched) & set(part.launched)
    assert finished_keys(st, rest.sweep_dir) == in_memory(st, 0)  # as one uninterrupted loop
    assert invocations(rest.sweep_dir) == [1] * rest.runs


def test_unfinished_runs_are_relaunched(tmp_path):
    path, _, budget = study(tmp_path)
    first = adaptive(path, tmp_path / "root", budget, max_rounds=1)
    victim = next((first.sweep_dir / "runs").iterdir())
    (victim / "status.json").unlink()  # planted: a COMPLETED run never moves back
    update_status(victim, State.PREEMPTED)
    (victim / "evals.parquet").unlink()
    again = adaptive(path, tmp_path / "root", budget, max_rounds=0)
    assert len(again.launched) == 1 and again.runs == first.runs
    assert len((victim / "invocations.log").read_text().splitlines()) == 2


def test_the_budget_stops_the_loop(tmp_path):
    path, st, _ = study(tmp_path)
    seed = float(seed_design(st.space, st.cost_of)["flops"].sum())
    res = adaptive(path, tmp_path / "root", 1.5 * seed)
    assert res.stopped == "budget" and res.spent <= 1.5 * seed and res.fit.width > WIDTH
    with pytest.raises(UserError, match="the seed design .* over the budget"):
        adaptive(path, tmp_path / "other", seed / 2)


def test_the_sweep_command_runs_the_loop_and_refuses_half_flags(tmp_path, capsys, monkeypatch):
    """``scalelab sweep SPEC --adaptive --budget H`` is the loop (same runs as the function);
    --budget without --adaptive (and the reverse) is one line, exit 2; ``-q`` reaches the
    jobs through SCALELAB_QUIET."""
    from scalelab.cli import main
    from scalelab.train.console.progress_log import LOG_FORMAT_ENV, QUIET_ENV

    for name in (QUIET_ENV, LOG_FORMAT_ENV):  # the command sets them: restored afterwards
        monkeypatch.delenv(name, raising=False)

    path, st, budget = study(tmp_path)
    root = tmp_path / "cli"
    args = ["sweep", str(path), "--executor", "debug", "--train-target", TARGET, "--root", str(root)]
    for half in (["--budget", str(budget)], ["--adaptive"]):
        with pytest.raises(SystemExit) as exit_:
            main([*args, *half])
        assert exit_.value.code == 2
        err = capsys.readouterr().err.strip().splitlines()
        assert len(err) == 1 and "--adaptive needs --budget" in err[0]
    with pytest.raises(SystemExit) as exit_:
        main([*args, "--adaptive", "--budget", str(budget), "--target-width", str(WIDTH), "-q"])
    assert exit_.value.code == 0
    assert os.environ[QUIET_ENV] == "1"
    sweep = root / "ad"
    assert finished_keys(st, sweep) == in_memory(st, 0)
    assert pl.read_parquet(sweep / "adaptive" / "trajectory.parquet")["stopped"][-1] == "target"


@pytest.mark.parametrize("ridge", [False, True])
def test_tune_ridge_reaches_the_study_space(tmp_path, ridge):
    """``tune: {method: coordinate, ridge: true}`` makes the study's neighbours include the
    all-up / all-down diagonal (the twin's epochs x weight-decay ridge, docs/adaptive.md)."""
    text = spec_text("rg") + ("tune: {method: coordinate, axes: [data.epochs, optim.weight_decay], "
                              f"ridge: {str(ridge).lower()}}}\n")
    path = tmp_path / "rg.yaml"
    path.write_text(text)
    st = load_study(load_spec(path))
    assert st.space.ridge is ridge
    assert ((1, 1) in st.space.neighbours((0, 0))) is ridge


def test_a_ranking_study_runs_both_recipes_and_matches_the_in_memory_loop(tmp_path):
    """``goal="ranking"``: Kim's default recipes of the grid, standard (weight decay 0.1)
    and regularized (every cell). The sweep loop trains the runs the in-memory loop with the
    same target trains; its rounds record each candidate's recipe and the trajectory the
    target's name."""
    from analysis.adaptive.targets import Ranking

    path, st, budget = study(tmp_path)
    res = run_adaptive_sweep(path, budget, target_width=0.0, root=tmp_path / "root",
                             executor="debug", target=TARGET, goal="ranking")
    assert set(res.fits) == {"regularized", "standard"}
    spaces = {"regularized": st.space,
              "standard": st.space.restrict({"optim.weight_decay": [0.1]})}
    priced = SimpleNamespace(flops=st.cost_of, train=law(0).train)
    memory = run_adaptive(priced, st.space, seed_design(st.space, st.cost_of), budget, 0.0,
                          target=Ranking(spaces))
    assert finished_keys(st, res.sweep_dir) == set(memory.runs["key"].to_list())
    assert res.stopped == memory.stopped and res.summary.order == memory.summary.order
    rounds = [pl.read_parquet(f) for f in sorted((res.sweep_dir / "adaptive").glob("round-*.parquet"))]
    chosen = pl.concat([r.filter(pl.col("selected")) for r in rounds[1:]])
    assert set(chosen["recipe"].to_list()) == {"regularized", "standard"}
    traj = pl.read_parquet(res.sweep_dir / "adaptive" / "trajectory.parquet")
    assert (traj["target"] == "ranking").all()
