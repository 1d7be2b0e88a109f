"""``scalelab fit`` / ``scalelab report`` on a tiny synthetic sweep directory."""

import json

import numpy as np
import pytest
from _cli_exit import exit_code as run
from _cli_exit import run_cli

from analysis.fit.prediction import holdout_largest_2d
from analysis.synthetic.prediction_2d import simulate_2d
from analysis.synthetic.runs import synthetic_runs


@pytest.fixture()
def sweep(tmp_path):
    d = tmp_path / "tiny-sweep"
    d.mkdir()
    synthetic_runs().write_parquet(d / "runs.parquet")
    return d



def test_fit_prints_parameters_with_cis_and_saves_plot(sweep, capsys):
    assert run(["fit", str(sweep), "--law", "data_constrained", "--bootstrap", "20"]) == 0
    out = capsys.readouterr().out
    assert "R_D" in out and "R_N" in out and "95% CI" in out and "fixed" in out
    assert "DIVERGED" in out  # exclusion note
    assert (sweep / "fit" / "data_constrained.png").is_file()
    assert (sweep / "fit" / "data_constrained.svg").is_file()


def test_fit_powerlaw_in_d_with_out(sweep, tmp_path, capsys):
    stem = tmp_path / "plots" / "pl"
    assert (
        run(
            [
                "fit",
                str(sweep),
                "--law",
                "powerlaw",
                "--x",
                "D",
                "--bootstrap",
                "0",
                "--out",
                str(stem),
            ]
        )
        == 0
    )
    assert "alpha" in capsys.readouterr().out
    assert stem.with_suffix(".png").is_file()


def test_report_writes_markdown_and_prints_path(sweep, capsys):
    assert run(["report", str(sweep), "--bootstrap", "10"]) == 0
    path = sweep / "report" / "report.md"
    assert path.is_file() and str(path) in capsys.readouterr().out


@pytest.mark.parametrize(
    "argv, message",
    [
        (["fit", "{sweep}", "--law", "chinchila"], "did you mean 'chinchilla'"),
        (["fit", "{sweep}", "--x", "Q"], "--x must be one of"),
        (["fit", "{sweep}", "--x", "K"], "run `scalelab ensemble"),  # K is valid: no ensembles
        (["fit", "{sweep}", "--bootstrap", "1"], "--bootstrap must be 0 or >= 2"),
        (["fit", "{sweep}", "--loss-column", "final_los"], "no loss column 'final_los'"),
        (["fit", "{missing}"], "no such sweep directory"),
        (["report", "{missing}"], "no such sweep directory"),
    ],
)
def test_bad_input_exits_2_with_one_line(sweep, tmp_path, capsys, argv, message):
    argv = [a.format(sweep=sweep, missing=tmp_path / "nope") for a in argv]
    assert run(argv) == 2
    err = capsys.readouterr().err
    assert message in err and "Traceback" not in err and len(err.strip().splitlines()) == 1


@pytest.mark.parametrize(
    "law, runs_per_size",
    [("chinchilla", 5), ("data_constrained", 24)],
)
def test_fit_holdout_largest_for_a_law_of_n_and_d(tmp_path, capsys, law, runs_per_size):
    """``--holdout-largest 1`` with chinchilla and data_constrained on a table of runs (the
    synthetic study of tests/analysis/test_extrapolation_2d.py, seed 1: 6 sizes N = 1e7..1e9,
    noise 0.01 nats): one line with each held-out run's interval and covered / NOT covered,
    the numbers of a direct ``holdout_largest_2d`` call (to 1e-9), and the JSON beside."""
    runs, _ = simulate_2d(np.random.default_rng(1), law, 6, 0.01)
    table = tmp_path / f"{law}.csv"
    runs.drop("truth").write_csv(table)
    code, out, err = run_cli(["fit", table, "--law", law, "--holdout-largest", "1",
                              "--bootstrap", "0", "-q"], capsys)
    assert code == 0, err
    lines = [ln for ln in out.splitlines() if ln.startswith(f"{law} vs N: ")]
    assert len(lines) == 1
    line = lines[0]
    assert f"held out N = 1B ({runs_per_size} runs, " in line and "95% PI" in line
    assert line.count("nats, covered") + line.count("nats, NOT covered") == runs_per_size
    direct = holdout_largest_2d(runs.drop("truth"), law, 1)
    assert line == f"{law} vs N: {direct.line()}"
    doc = json.loads((tmp_path / f"{law}_fit" / f"{law}-holdout.json").read_text())
    group = doc["groups"][0]
    assert doc["holdout_largest"] == 1 and group["checked"] and len(group["points"]) == runs_per_size
    for p, q in zip(group["points"], direct.points):
        assert p["N"] == q.N and p["D"] == q.D and p["covered"] == q.covered
        np.testing.assert_allclose([p["predicted"], p["lo"], p["hi"]],
                                   [q.predicted, q.lo, q.hi], rtol=1e-9)


def test_fit_holdout_largest_refuses_a_k_that_leaves_one_size(tmp_path, capsys):
    runs, _ = simulate_2d(np.random.default_rng(1), "chinchilla", 4, 0.01)
    table = tmp_path / "chinchilla.csv"
    runs.drop("truth").write_csv(table)
    code, _, err = run_cli(["fit", table, "--law", "chinchilla", "--holdout-largest", "3",
                            "--bootstrap", "0", "-q"], capsys)
    assert code == 2 and "3 leaves 1 of 4 distinct N values" in err
    assert len(err.strip().splitlines()) == 1
