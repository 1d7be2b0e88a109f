"""Progress of ``tune``, ``fit --bootstrap``, ``report`` and ``collect``:
``--log-format json`` prints progress events on stderr whose done counts rise to their
totals, ``-q`` prints none while the result still prints, text lines off a terminal, rich
bars on one; and the callbacks of ``tune()`` and ``collect()`` themselves."""

from __future__ import annotations

import io
import json
import sys
import textwrap
from pathlib import Path

import polars as pl
import pytest
from rich.console import Console

sys.path.insert(0, str(Path(__file__).resolve().parent / "sweep"))  # landscape_train
from landscape_train import landscape

from analysis.progress import BootstrapProgress
from analysis.synthetic.runs import synthetic_runs
from scalelab.cli import main
from scalelab.cli import progress as cli_progress
from scalelab.cli.progress import ProgressOutput
from scalelab.store.atomic import write_parquet_atomic
from scalelab.store.status import State, update_status
from scalelab.sweep.spec.load import parse_spec
from scalelab.sweep.view.collect import collect
from scalelab.train.console.progress_log import LogSettings
from scalelab.tune.study import tune


@pytest.fixture(autouse=True)
def _no_log_env(monkeypatch):
    monkeypatch.delenv("SCALELAB_LOG_FORMAT", raising=False)
    monkeypatch.delenv("SCALELAB_QUIET", raising=False)


def run(argv: list[str], capsys) -> tuple[int, str, str]:
    with pytest.raises(SystemExit) as exc:
        main(argv)
    out, err = capsys.readouterr()
    return exc.value.code, out, err


def events(err: str, task: str) -> list[dict]:
    """The JSON progress events of ``task`` on stderr (every JSON line must be one)."""
    docs = [json.loads(line) for line in err.splitlines() if line.startswith("{")]
    assert all(d["event"] == "progress" for d in docs)
    return [d for d in docs if d["task"] == task]


def assert_rises_to_total(evs: list[dict]) -> None:
    done = [e["done"] for e in evs]
    assert len(evs) >= 2 and done == sorted(done) and done[0] < done[-1]
    assert done[-1] == evs[-1]["total"]


def assert_no_progress(err: str) -> None:
    assert not any(line.startswith("{") for line in err.splitlines())
    assert "resamples" not in err and "sections" not in err and "trials" not in err


# --- fit --bootstrap, report: a synthetic runs table --------------------------------------
@pytest.fixture()
def sweep(tmp_path):
    d = tmp_path / "sw"
    d.mkdir()
    synthetic_runs().write_parquet(d / "runs.parquet")
    return d


def test_fit_bootstrap_progress_json_and_quiet(sweep, capsys):
    argv = ["fit", str(sweep), "--where", "D=1.6e9", "--bootstrap", "80"]
    code, out, err = run(argv + ["--log-format", "json"], capsys)
    assert code == 0 and "95% CI" in out
    boot = events(err, "bootstrap")
    assert_rises_to_total(boot)
    assert boot[-1]["done"] == 80 and boot[-1]["law"] == "powerlaw"
    stages = {e["stage"] for e in events(err, "fit")}
    assert {"screen", "continue"} <= stages  # the multistart's stages, iterations of each
    code, out, err = run(argv + ["-q"], capsys)
    assert code == 0 and "95% CI" in out
    assert_no_progress(err)


def test_text_lines_off_a_terminal_only_for_steps_that_take_a_while(sweep, capsys, monkeypatch):
    argv = ["fit", str(sweep), "--where", "D=1.6e9", "--bootstrap", "40"]
    code, out, err = run(argv, capsys)
    assert code == 0 and "95% CI" in out
    assert_no_progress(err)  # every step ended within TEXT_DELAY_S: a quick command is quiet
    monkeypatch.setattr(cli_progress, "TEXT_DELAY_S", 0.0)  # as if each had taken long
    code, out, err = run(argv, capsys)
    assert code == 0 and "95% CI" in out and "resamples" not in out  # stdout: the result
    assert "bootstrap powerlaw: 40/40 resamples" in err
    assert "fit powerlaw: screen 1/12" in err


def test_report_progress_json_and_quiet(sweep, capsys):
    runs = pl.read_parquet(sweep / "runs.parquet")  # two values of D: one fitted group
    runs.filter(pl.col("D_total").is_in([2e8, 1.6e9])).write_parquet(sweep / "runs.parquet")
    code, out, err = run(["report", str(sweep), "--bootstrap", "4", "--log-format", "json"], capsys)
    assert code == 0 and str(sweep / "report" / "report.md") in out
    sections = events(err, "report")
    md = [e for e in sections if e["report"] == "report.md"]
    assert_rises_to_total(md)
    assert md[-1]["done"] == 4 and md[-1]["section"] == ""  # 2 groups, figures, joint law
    assert md[0]["section"] == "power law in N, D=2e+08"  # groups by D, in numeric order
    ic = [e for e in sections if e["report"] == "infinite_compute.md"]  # no recipe here
    assert ic[-1]["done"] == ic[-1]["total"] and ic[-1]["section"] == "not written"
    # the laws in N have t intervals (recipe_asymptote): no bootstrap; no joint law on 2 D
    assert [e["done"] for e in events(err, "bootstrap") if e["done"] == e["total"]] == []
    code, out, err = run(["report", str(sweep), "--bootstrap", "4", "-q"], capsys)
    assert code == 0 and str(sweep / "report" / "report.md") in out
    assert_no_progress(err)


# --- collect: run directories read ----------------------------------------------------------
def make_runs(root: Path, n: int = 5) -> Path:
    """A sweep of ``n`` planned runs, all but the last COMPLETED with a val loss."""
    rows = [{"run_id": f"id{i}", "name": f"r{i}", "run_dir": f"runs/r{i}-id{i}", "N": 1000 * (i + 1),
             "N_non_embedding": 500, "D_unique": 100, "D_total": 400, "epochs": 4.0, "steps": 20,
             "flops": 2.4e6, "member": None, "gpu_hours": None} for i in range(n)]
    write_parquet_atomic(root / "plan.parquet", pl.DataFrame(rows))
    for i, row in enumerate(rows[:-1]):
        d = root / row["run_dir"]
        d.mkdir(parents=True)
        update_status(d, State.RUNNING)
        update_status(d, State.COMPLETED, steps_done=20, wall_time_s=1.0)
        write_parquet_atomic(d / "evals.parquet", pl.DataFrame({
            "run_id": [row["run_id"]], "step": [20], "tokens": [0], "split": ["val"],
            "loss": [3.0 + i]}))
    return root


def test_collect_library_reports_every_run_dir(tmp_path):
    seen = []
    frame = collect(make_runs(tmp_path / "sw"), progress=seen.append)
    assert [p.done for p in seen] == [0, 1, 2, 3, 4, 5, 5, 5] and {p.total for p in seen} == {5}
    assert [p.final for p in seen] == [False] * 7 + [True]
    assert seen[-1].step == "wrote runs.parquet" and frame.height == 5
    assert seen[-1].line() == "collect: 5/5 runs, wrote runs.parquet"


def test_collect_progress_json_env_and_quiet(tmp_path, capsys, monkeypatch):
    sweep = make_runs(tmp_path / "sw")
    code, out, err = run(["collect", str(sweep), "--log-format", "json"], capsys)
    assert code == 0 and "5 runs" in out
    evs = events(err, "collect")
    assert_rises_to_total(evs)
    assert evs[-1]["final"] and evs[-1]["done"] == 5  # every run directory read
    monkeypatch.setenv("SCALELAB_LOG_FORMAT", "json")  # the environment, as sweep jobs get it
    code, out, err = run(["collect", str(sweep)], capsys)
    assert events(err, "collect")[-1]["done"] == 5
    monkeypatch.setenv("SCALELAB_QUIET", "1")
    code, out, err = run(["collect", str(sweep)], capsys)
    assert code == 0 and "5 runs" in out and err == ""
    monkeypatch.delenv("SCALELAB_QUIET")
    code, out, err = run(["collect", str(sweep), "-q"], capsys)
    assert code == 0 and "5 runs" in out and err == ""
    code, out, err = run(["collect", str(sweep), "--log-format", "xml"], capsys)
    assert code == 2 and "--log-format" in err


# --- tune: trials done of the total, best so far ----------------------------------------------
SPEC = """\
name: pt
base:
  model: {preset: cpu-50k}
  data: {dataset: /nonexistent/x, vocab_size: 256, unique_tokens: 2048, seq_len: 32}
  train: {batch_size: 8}
"""
OPTUNA = SPEC + textwrap.dedent("""\
    tune:
      method: optuna
      n_trials: 4
      parallel: 2
      sampler_seed: 0
      space:
        optim.lr: {low: 1.0e-4, high: 1.0e-1, log: true}
        data.epochs: {choices: [1, 2, 4]}
    """)
COORD = SPEC + textwrap.dedent("""\
    grid:
      data.epochs: [1, 2, 4]
      optim.lr: [1.0e-3, 3.0e-3, 1.0e-2]
      optim.weight_decay: [0.1]
    tune:
      method: coordinate
      start: {data.epochs: 4, optim.lr: 1.0e-2, optim.weight_decay: 0.1}
    """)


def landscape_runner(plan):
    return {rid: landscape(c.model.preset, c.data.epochs, c.optim.lr, c.optim.weight_decay)
            for rid, c in zip(plan.table["run_id"], plan.configs)}


def test_tune_library_reports_trials_and_best_so_far(tmp_path):
    seen = []
    report = tune(parse_spec(OPTUNA, file="t.yaml"), tmp_path / "o", runner=landscape_runner,
                  progress=seen.append)
    assert [(p.done, p.total) for p in seen] == [(0, 4), (2, 4), (4, 4)]  # per round of 2
    assert seen[0].best_value is None and "no trial finished yet" in seen[0].line()
    assert seen[1].best_value >= seen[2].best_value == report.best_value
    assert seen[2].best_params == report.best_params and seen[2].final
    assert seen[2].line().startswith("tune (optuna): 4/4 trials, best ")
    seen.clear()
    report = tune(parse_spec(COORD, file="t.yaml"), tmp_path / "c", runner=landscape_runner,
                  progress=seen.append)
    trained = len(report.searches[0][1].evaluated)
    assert [p.total for p in seen] == [None] * (len(seen) - 1) + [trained]  # known at the end
    assert [p.done for p in seen][-1] == trained and seen[-1].final
    assert seen[-1].best_value == report.best_value and seen[-1].best_params == report.best_params


def test_tune_progress_json_and_quiet(tmp_path, capsys):
    spec = tmp_path / "pt.yaml"
    spec.write_text(OPTUNA)
    argv = ["tune", str(spec), "--executor", "debug", "--train-target", "landscape_train:train"]
    code, out, err = run(argv + ["--root", str(tmp_path / "a"), "--log-format", "json"], capsys)
    assert code == 0 and "4 trials" in out
    trials = events(err, "tune")
    assert_rises_to_total(trials)
    assert trials[-1]["done"] == 4 and trials[-1]["method"] == "optuna"
    assert trials[-1]["best_value"] is not None and "optim.lr" in trials[-1]["best_params"]
    code, out, err = run(argv + ["--root", str(tmp_path / "b"), "-q"], capsys)
    assert code == 0 and "4 trials" in out
    assert_no_progress(err)


# --- the renderer's modes ---------------------------------------------------------------------
def test_bars_on_a_terminal_and_json_lines_elsewhere():
    screen = io.StringIO()
    with ProgressOutput(LogSettings(), console=Console(file=screen, force_terminal=True,
                                                       width=120)) as output:
        assert output.mode == "bars"
        for done in (0, 20, 40):
            output.sink(BootstrapProgress("powerlaw", done, 40, 0.1))
    assert "bootstrap powerlaw" in screen.getvalue() and "40/40" in screen.getvalue()
    stream = io.StringIO()
    with ProgressOutput(LogSettings(format="json"), stream=stream) as output:
        output.sink(BootstrapProgress("powerlaw", 40, 40, float("nan")))
    doc = json.loads(stream.getvalue())
    assert doc == {"event": "progress", "task": "bootstrap", "done": 40, "total": 40,
                   "law": "powerlaw", "elapsed_s": None}  # strict JSON: NaN is null
    assert ProgressOutput(LogSettings(quiet=True)).sink is None
