"""``scalelab fit`` / ``scalelab report`` on a tiny synthetic sweep directory."""

import pytest

from analysis.recipes.synthetic import synthetic_runs
from _cli_exit import exit_code as run


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
