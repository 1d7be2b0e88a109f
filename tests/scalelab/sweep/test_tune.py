"""Tuning: the certified coordinate search (pure) and ``tune`` over Optuna / execute()."""

import math
import textwrap
from itertools import product

import optuna
import pytest

from scalelab.cli import main
from scalelab.sweep.spec.load import parse_spec
from scalelab.tune.coordinate import CoordinateSearch, coordinate_search
from scalelab.tune.study import JOURNAL, tune

E = [1, 2, 4, 8, 16, 32, 64]
LR = [1e-4, 3e-4, 1e-3, 3e-3, 1e-2, 3e-2]
WD = [0.0, 0.1, 0.2, 0.4, 0.8, 1.6, 3.2, 6.4]
AXES = ["data.epochs", "optim.lr", "optim.weight_decay"]


def bowl(opt, scale=(1.0, 2.0, 0.5)):
    """Convex in grid-index space with its minimum at grid values ``opt``."""
    centre = (E.index(opt[0]), LR.index(opt[1]), WD.index(opt[2]))

    def evaluate(points):
        out = []
        for p in points:
            idx = (E.index(p[0]), LR.index(p[1]), WD.index(p[2]))
            out.append(3.0 + sum(s * (i - c) ** 2 for s, i, c in zip(scale, idx, centre)))
        return out

    return evaluate


def test_convex_landscape_certifies_the_global_minimum_kim_150M():
    # Kim et al.'s certified best for 150M at 200M tokens: 16 epochs / 3e-3 / wd 0.8.
    calls = []

    def evaluate(points):
        calls.append(list(points))
        return bowl((16, 3e-3, 0.8))(points)

    res = coordinate_search([E, LR, WD], (8, 1e-3, 0.8), evaluate, axes=AXES)
    assert res.best == (16, 3e-3, 0.8) and res.loss == 3.0
    assert res.certified and res.flags == ()
    assert res.path[0] == (8, 1e-3, 0.8) and res.path[-1] == (16, 3e-3, 0.8)
    neighbours = [(8, 3e-3, 0.8), (32, 3e-3, 0.8), (16, 1e-3, 0.8), (16, 1e-2, 0.8),
                  (16, 3e-3, 0.4), (16, 3e-3, 1.6)]
    assert all(res.evaluated[n] > res.loss for n in neighbours)  # all 6 trained and worse
    assert len(res.evaluated) < len(E) * len(LR) * len(WD) // 10  # far fewer than the grid
    assert sum(len(c) for c in calls) == len(res.evaluated)  # nothing trained twice
    assert len(calls[0]) == 7  # centre + 6 neighbours in one batch


def test_non_convex_landscape_certifies_a_local_minimum():
    glob, local = (E.index(64), LR.index(1e-4), WD.index(6.4)), (1, 2, 2)

    def evaluate(points):
        out = []
        for p in points:
            i = (E.index(p[0]), LR.index(p[1]), WD.index(p[2]))
            d_local = sum((a - b) ** 2 for a, b in zip(i, local))
            d_glob = sum((a - b) ** 2 for a, b in zip(i, glob))
            out.append(min(2.0 + 0.1 * d_local, 1.0 + 0.1 * d_glob))
        return out

    res = coordinate_search([E, LR, WD], (2, 1e-3, 0.4), evaluate, axes=AXES)
    assert res.best == (2, 1e-3, 0.2) and res.certified  # certification is local
    assert res.loss == pytest.approx(2.0)
    assert min(evaluate(list(product(E, LR, WD)))) == pytest.approx(1.0)  # not the global one


def test_edge_optimum_is_flagged_not_certified():
    res = coordinate_search([E, LR, WD], (8, 1e-3, 0.8), bowl((64, 3e-3, 0.0)), axes=AXES)
    assert res.best == (64, 3e-3, 0.0) and not res.certified
    assert any("data.epochs is at its grid maximum 64" in f for f in res.flags)
    assert any("optim.weight_decay is at its grid minimum 0.0" in f for f in res.flags)
    assert len(res.flags) == 2


def test_failed_neighbour_and_ties_block_certification():
    base = bowl((16, 3e-3, 0.8))

    def with_failure(points):
        return [None if p == (32, 3e-3, 0.8) else v for p, v in zip(points, base(points))]

    res = coordinate_search([E, LR, WD], (16, 3e-3, 0.8), with_failure, axes=AXES)
    assert res.best == (16, 3e-3, 0.8) and not res.certified
    assert res.flags == ("neighbour data.epochs=32 failed",)

    def with_tie(points):
        return [3.0 if p == (16, 3e-3, 0.4) else v for p, v in zip(points, base(points))]

    res = coordinate_search([E, LR, WD], (16, 3e-3, 0.8), with_tie, axes=AXES)
    assert not res.certified and "ties or beats it" in res.flags[0]


def test_diverged_neighbours_count_as_worse():
    base = bowl((16, 3e-3, 0.8))

    def diverging(points):
        return [math.inf if p[1] >= 1e-2 else v for p, v in zip(points, base(points))]

    res = coordinate_search([E, LR, WD], (16, 3e-3, 0.8), diverging, axes=AXES)
    assert res.certified and res.evaluated[(16, 1e-2, 0.8)] == math.inf


TWIN_26K = {  # measured final losses of twin-26k (sweeps/adaptive_twin_reference.yaml, 2026-11-26)
    (32, 0.1): 2.3316, (32, 1.0): 2.1468, (32, 3.0): 2.1910, (32, 10.0): 2.4969,
    (64, 0.1): 2.4203, (64, 1.0): 2.1549, (64, 3.0): 2.0688, (64, 10.0): 2.2852,
    (128, 0.1): 2.9224, (128, 1.0): 2.2188, (128, 3.0): 2.1065, (128, 10.0): 2.1933,
}


@pytest.mark.parametrize("ridge, best, certified", [(False, (32, 1.0), False), (True, (64, 3.0), True)])
def test_the_ridge_step_escapes_the_twins_diagonal_trap(ridge, best, certified):
    """On real twin-26k losses, one-axis steps from (32 ep, wd 1) stop there (each one-axis
    neighbour is worse; only the epochs edge keeps it from being certified) though (64, 3),
    one step up on both axes, is 0.08 nats lower; with ``ridge`` the search steps there and
    certifies it, an interior optimum (docs/adaptive.md)."""
    res = coordinate_search([(32, 64, 128), (0.1, 1.0, 3.0, 10.0)], (32, 1.0),
                            lambda pts: [TWIN_26K[p] for p in pts], ridge=ridge)
    assert res.best == best and res.certified == certified
    assert res.loss == TWIN_26K[best]


def test_budget_and_one_axis_grid():
    res = coordinate_search([E, LR, WD], (1, 1e-4, 0.0), bowl((64, 3e-2, 6.4)), axes=AXES,
                            max_evals=10)
    assert not res.certified and "max_evals=10" in res.flags[-1] and len(res.evaluated) <= 10
    single = coordinate_search([[5.0]], (5.0,), lambda pts: [1.0] * len(pts))
    assert single.best == (5.0,) and not single.certified  # both neighbours off the grid


def test_state_machine_interleaves_searches():
    a = CoordinateSearch([E, LR, WD], (8, 1e-3, 0.8), axes=AXES)
    b = CoordinateSearch([E, LR, WD], (2, 1e-2, 0.1), axes=AXES)
    fa, fb = bowl((16, 3e-3, 0.8)), bowl((4, 1e-3, 1.6))
    while not (a.done and b.done):
        pa, pb = a.pending(), b.pending()
        a.tell(dict(zip(pa, fa(pa)))) if pa else None
        b.tell(dict(zip(pb, fb(pb)))) if pb else None
    assert a.result().best == (16, 3e-3, 0.8) and b.result().best == (4, 1e-3, 1.6)
    assert a.result().certified and b.result().certified
    with pytest.raises(ValueError, match="strictly increasing"):
        CoordinateSearch([[2, 1]], (1,))


# --- tune() over a fake runner and over execute() -----------------------------------------
SPEC = """\
name: tt
base:
  model: {preset: cpu-50k}
  data: {dataset: /nonexistent/x, vocab_size: 256, unique_tokens: 2048, seq_len: 32}
  train: {batch_size: 8}
"""


def landscape_value(cfg):
    from landscape_train import landscape

    return landscape(cfg.model.preset, cfg.data.epochs, cfg.optim.lr, cfg.optim.weight_decay)


class FakeRunner:
    """Trains (pretends) each new run once; returns the landscape for every run asked."""

    def __init__(self):
        self.trained: list[str] = []
        self.calls = 0

    def __call__(self, plan):
        self.calls += 1
        out = {}
        for rid, cfg in zip(plan.table["run_id"], plan.configs):
            if rid not in self.trained:
                self.trained.append(rid)
            out[rid] = landscape_value(cfg)
        return out


COORD = SPEC + textwrap.dedent("""\
    grid:
      model.preset: [cpu-50k, cpu-100k]
      data.epochs: [1, 2, 4, 8]
      optim.lr: [3.0e-4, 1.0e-3, 3.0e-3, 1.0e-2]
      optim.weight_decay: [0.0, 0.1, 0.4]
    tune:
      method: coordinate
      start: {data.epochs: 1, optim.lr: 1.0e-2, optim.weight_decay: 0.4}
    """)


def test_tune_coordinate_one_search_per_cell(tmp_path):
    runner = FakeRunner()
    report = tune(parse_spec(COORD, file="t.yaml"), tmp_path, runner=runner)
    cells = {cell["model.preset"]: res for cell, res in report.searches}
    assert cells["cpu-50k"].best == (2.0, 3e-3, 0.1) and cells["cpu-50k"].certified
    assert cells["cpu-100k"].best == (4.0, 1e-3, 0.1) and cells["cpu-100k"].certified
    assert len(runner.trained) == len(set(runner.trained)) == len(report.plan)
    assert len(report.plan) < 2 * 4 * 4 * 3
    assert report.best_params["model.preset"] in ("cpu-50k", "cpu-100k")
    assert all("certified" in line for line in report.lines())
    names = set(report.plan.table["name"])
    assert "cpu-50k_ep2_lr0.003_wd0.1" in names


OPTUNA = SPEC + textwrap.dedent("""\
    seeds: [0, 1]
    tune:
      method: optuna
      n_trials: 6
      parallel: 2
      sampler_seed: 3
      space:
        optim.lr: {low: 1.0e-4, high: 1.0e-1, log: true}
        optim.weight_decay: {choices: [0.0, 0.1, 0.4]}
        data.epochs: {choices: [1, 2, 4]}
    """)


def test_tune_optuna_is_resumable_and_trials_are_runs(tmp_path):
    spec = parse_spec(OPTUNA, file="t.yaml")
    runner = FakeRunner()
    first = tune(spec, tmp_path, runner=runner)
    assert (tmp_path / JOURNAL).is_file()
    assert first.trials.height == 6 and (first.trials["state"] == "COMPLETE").all()
    assert runner.calls == 3  # 6 trials, 2 per execute() round
    # A trial = its runs over the seeds; its value is their mean objective.
    row = first.trials.row(0, named=True)
    assert len(row["run_ids"]) == 2
    cfgs = {rid: c for rid, c in zip(first.plan.table["run_id"], first.plan.configs)}
    assert row["value"] == pytest.approx(sum(landscape_value(cfgs[r]) for r in row["run_ids"]) / 2)
    assert {cfgs[r].train.init_seed for r in row["run_ids"]} == {0, 1}
    assert cfgs[row["run_ids"][0]].optim.lr == pytest.approx(row["params.optim.lr"])

    second = tune(spec, tmp_path, runner=FakeRunner(), n_trials=9)  # continue the study
    assert second.trials.height == 9
    assert second.trials.head(6).select("number", "value").equals(first.trials.select("number", "value"))
    assert first.best_value >= second.best_value


def test_tune_optuna_requeues_trials_of_a_dead_process(tmp_path):
    spec = parse_spec(OPTUNA, file="t.yaml")
    tune(spec, tmp_path, runner=FakeRunner(), n_trials=2)
    storage = optuna.storages.JournalStorage(
        optuna.storages.journal.JournalFileBackend(str(tmp_path / JOURNAL)))
    study = optuna.load_study(study_name="tt", storage=storage)
    orphan = study.ask()  # a process asked, suggested, then died
    lr = orphan.suggest_float("optim.lr", 1e-4, 1e-1, log=True)
    orphan.suggest_categorical("optim.weight_decay", [0.0, 0.1, 0.4])
    orphan.suggest_categorical("data.epochs", [1, 2, 4])
    report = tune(spec, tmp_path, runner=FakeRunner(), n_trials=3)
    states = dict(zip(report.trials["number"], report.trials["state"]))
    assert states[orphan.number] == "FAIL"
    retry = report.trials.filter(report.trials["number"] > orphan.number)
    assert retry.height == 1 and retry["params.optim.lr"][0] == pytest.approx(lr)
    assert retry["state"][0] == "COMPLETE"


def test_tune_cli_through_execute_debug_backend(tmp_path, capsys, monkeypatch):
    spec = tmp_path / "tt.yaml"
    spec.write_text(COORD.replace("model.preset: [cpu-50k, cpu-100k]", "model.preset: [cpu-50k]")
                    .replace("data.epochs: [1, 2, 4, 8]", "data.epochs: [1, 2, 4]")
                    .replace("optim.lr: [3.0e-4, 1.0e-3, 3.0e-3, 1.0e-2]",
                             "optim.lr: [1.0e-3, 3.0e-3, 1.0e-2]")
                    .replace("start: {data.epochs: 1,", "start: {data.epochs: 4,"))
    argv = ["tune", str(spec), "--root", str(tmp_path / "root"), "--executor", "debug",
            "--train-target", "landscape_train:train"]
    for _attempt in range(2):
        with pytest.raises(SystemExit) as code:
            main(argv)
        out = capsys.readouterr().out
        assert code.value.code == 0
        assert "best (2.0, 0.003, 0.1) loss 3 after" in out and "certified" in out
        assert "NOT certified" not in out
        runs = sorted((tmp_path / "root" / "tt-tune" / "runs").iterdir())
        logs = [len((r / "invocations.log").read_text().splitlines()) for r in runs]
        assert logs == [1] * len(runs)  # the re-run trained nothing again
    assert 7 <= len(runs) < 27
    assert (tmp_path / "root" / "tt-tune" / "runs.parquet").is_file()
