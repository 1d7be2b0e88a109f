"""``scalelab transfer --predict`` and the figure's law (issue 34, item 7), on synthetic
sweeps with a known optimum (``analysis.synthetic.transfer``; nothing is trained).

Truth: optim.lr* = 0.03 · N^-0.35 (``TransferTruth()``), 7 lr values a factor 2 apart per
size, per-run loss noise 0.003. Tolerances, written down:

- the truth at a predicted point lies inside the printed 95% prediction interval, and the
  printed hp* is within 0.10 in ln units of it (the interval's half-width is 0.03-0.07 ln
  units here: about 3 SEs at N=1e6, 3.3x beyond the largest fitted size; the seed is fixed,
  so the test is deterministic);
- the figure's law is the printed law: its drawn line equals ``fit_transfer``'s law on the
  same runs to 1e-12 (relative), and the printed c, a_N (4 significant digits) to 2e-3;
  the held-out refit, drawn dashed, equals the printed "law without the K largest" the
  same way.
"""

from __future__ import annotations

import os
import re

import numpy as np
import polars as pl
import pytest
from _cli_exit import exit_code

from analysis.synthetic.transfer import TransferTruth, synthetic_sweep
from analysis.tables.layout import RUNS_FILE, RUNS_FOLDER

TRUTH = TransferTruth()
SIZES = np.geomspace(5e3, 3e5, 6)  # 5k .. 300k
LINE = re.compile(r"^predicted optim\.lr\* at (?P<at>[^:]+): (?P<hp>\S+), 95% PI \((?P<lo>\S+), "
                  r"(?P<hi>\S+)\); (?P<span>.*)$")


def _write_sweep(tmp_path, runs: pl.DataFrame):
    sweep = tmp_path / "sweep"
    (sweep / RUNS_FOLDER).mkdir(parents=True)
    runs = runs.with_columns(pl.format("{}/run-{}", pl.lit(RUNS_FOLDER), pl.col("run_id")).alias("run_dir"))
    runs.write_parquet(sweep / RUNS_FILE)
    later = (sweep / RUNS_FILE).stat().st_mtime + 60  # fresh: no collect
    os.utime(sweep / RUNS_FILE, (later, later))
    return sweep


def _predicted(out: str) -> list[dict]:
    found = [LINE.match(line) for line in out.splitlines()]
    return [{"at": m["at"], "hp": float(m["hp"]), "lo": float(m["lo"]), "hi": float(m["hi"]),
             "span": m["span"]} for m in found if m]


def test_predict_at_held_out_sizes_covers_the_truth(tmp_path, capsys):
    middle = float(SIZES[3])  # 58k: left out of the sweep, predicted (interpolation)
    runs, _ = synthetic_sweep(TRUTH, np.delete(SIZES, 3), rng=1)
    sweep = _write_sweep(tmp_path, runs)
    assert exit_code(["transfer", sweep, "--hp", "optim.lr", "--out", tmp_path / "fig",
                      "--predict", "N=1e6", "--predict", f"N={middle!r}", "--predict", "N=1e3"]) == 0
    got = _predicted(capsys.readouterr().out)
    assert [g["at"] for g in got] == ["N=1e+06", "N=5.83e+04", "N=1e+03"]
    for g, n in zip(got, (1e6, middle, 1e3)):
        truth = float(TRUTH.hp_star(np.array([[n]]))[0])
        assert g["lo"] < truth < g["hi"], (g, truth)
        assert abs(np.log(g["hp"] / truth)) < 0.10, (g, truth)
        assert g["lo"] < g["hp"] < g["hi"]
    assert got[0]["span"] == "extrapolation: N is 3.33x the largest fitted N (300,000)"
    assert got[1]["span"] == "inside the fitted range (N 5,000 to 300,000)"
    assert got[2]["span"] == "extrapolation: N is 5x below the smallest fitted N (5,000)"
    assert (tmp_path / "fig.png").is_file()


def test_predict_in_n_and_d(tmp_path, capsys):
    truth = TransferTruth(c=0.5, a=(-0.3, -0.15))
    pairs = np.array([(n, d) for n in np.geomspace(5e3, 3e5, 4) for d in (1e6, 4e6)])
    runs, _ = synthetic_sweep(truth, pairs, x=("N", "D"), rng=6)
    sweep = _write_sweep(tmp_path, runs)
    assert exit_code(["transfer", sweep, "--hp", "optim.lr", "--x", "N,D", "--out", tmp_path / "f",
                      "--predict", "D=2e6,N=1e5", "--predict", "N=1e6,D=1e7"]) == 0
    got = _predicted(capsys.readouterr().out)
    assert [g["at"] for g in got] == ["N=1e+05, D=2e+06", "N=1e+06, D=1e+07"]  # the law's order
    for g, nd in zip(got, ((1e5, 2e6), (1e6, 1e7))):
        want = float(truth.hp_star(np.array([nd]))[0])
        assert g["lo"] < want < g["hi"] and abs(np.log(g["hp"] / want)) < 0.10, (g, want)
    assert got[0]["span"].startswith("inside the fitted range (N 5,000 to 300,000; D ")
    assert got[1]["span"] == ("extrapolation: N is 3.33x the largest fitted N (300,000); D is "
                              "2.5x the largest fitted D (4,000,000)")


@pytest.mark.parametrize(("x", "value", "says"), [
    ("N", "n=1e9", "'n' is not a variable of the law in N (did you mean 'N'?); expected N=VALUE"),
    ("N", "D=2e10", "'D' is not a variable of the law in N; expected N=VALUE; pass --x N,D"),
    ("N", "N=1e9,D=2e10", "'D' is not a variable of the law in N"),
    ("N,D", "N=1e9", "missing D: the law in N, D needs N=VALUE,D=VALUE"),
    ("C", "N=1e9", "'N' is not a variable of the law in C; expected C=VALUE; pass --x N"),
    ("N", "N=1e9,N=2e9", "N given twice"),
    ("N", "1e9", "expected N=VALUE (the law's variables: N)"),
    ("N", "", "expected N=VALUE"),
    ("N", "N=", "N: expected a number such as 1e9, got ''"),
    ("N", "N=1B", "N: expected a number such as 1e9, got '1B'"),
    ("N", "N=nan", "N: expected a finite number, got 'nan'"),
    ("N", "N=-inf", "N: expected a finite number"),
    ("N", "N=0", "N: expected a value > 0, got '0'"),
    ("N", "N=-1e9", "N: expected a value > 0, got '-1e9'"),
    ("N", "N=1e400", "N: '1e400' is outside the float range"),
    ("N", "N=" + "9" * 400, "is outside the float range"),
    ("N", "N=1e-400", "N: '1e-400' is outside the float range"),
    ("N", "N=1\n2", "--predict N=1\\n2: N: expected a number"),
])
def test_bad_predict_exits_2_in_one_line(tmp_path, capsys, x, value, says):
    # parsed before the runs are read: a missing sweep is never reached
    assert exit_code(["transfer", tmp_path / "no-sweep", "--hp", "optim.lr", "--x", x,
                      "--predict", value]) == 2
    err = capsys.readouterr().err
    assert len(err.strip().splitlines()) == 1, err
    assert err.startswith("error: --predict ") and says in err, err


def test_figure_draws_the_printed_law_and_the_refit_only_dashed(tmp_path, capsys, monkeypatch):
    from analysis.plots import plots
    from analysis.plots.transfer import LAW_GID, PREDICT_GID, REFIT_GID
    from analysis.transfer.transfer import fit_transfer

    runs, _ = synthetic_sweep(TRUTH, SIZES, rng=1)
    sweep = _write_sweep(tmp_path, runs)
    figures, save = [], plots.save_figure
    monkeypatch.setattr(plots, "save_figure", lambda fig, stem: (figures.append(fig), save(fig, stem))[1])
    assert exit_code(["transfer", sweep, "--hp", "optim.lr", "--holdout-largest", "2",
                      "--predict", "N=1e9", "--out", tmp_path / "fig"]) == 0
    out = capsys.readouterr().out
    right = figures[0].axes[1]
    lines = {ln.get_gid(): ln for ln in right.get_lines() if ln.get_gid()}
    law, refit, point = lines[LAW_GID], lines[REFIT_GID], lines[PREDICT_GID]
    x, y = np.asarray(law.get_xdata()), np.asarray(law.get_ydata())
    assert law.get_linestyle() == "-" and refit.get_linestyle() == "--"
    assert "held-out check only" in refit.get_label() and "refit" in refit.get_label()

    full = fit_transfer(runs, ("N",), "optim.lr")  # what the command prints as "law"
    want = np.array([full.predict(N=v)[0] for v in x])
    np.testing.assert_allclose(y, want, rtol=1e-12)
    assert x.max() >= 1e9  # the law is drawn out to the predicted point

    def printed(title: str) -> tuple[float, float]:
        lines = out.splitlines()
        at = next(i for i, line in enumerate(lines) if line.startswith(f"{title}: optim.lr* = c"))
        return float(lines[at + 1].split()[2].rstrip(",")), float(lines[at + 2].split()[2].rstrip(","))

    c, a = printed("law")
    np.testing.assert_allclose(y, c * x ** a, rtol=2e-3)
    c2, a2 = printed("law without the 2 largest")
    np.testing.assert_allclose(refit.get_ydata(), c2 * np.asarray(refit.get_xdata()) ** a2, rtol=2e-3)
    assert np.max(np.abs(np.log(np.asarray(refit.get_ydata()) / y))) > 5e-3  # a different law
    assert right.get_legend_handles_labels()[1][0] == f"law: {c:.3g} N^{a:.3f}"

    (g,) = _predicted(out)
    assert point.get_xdata()[0] == 1e9 and np.isclose(point.get_ydata()[0], g["hp"], rtol=1e-3)
    assert np.isclose(point.get_ydata()[0], full.predict(N=1e9)[0], rtol=1e-12)


def test_plot_without_a_refit_draws_one_law_and_names_far_points():
    from analysis.plots.transfer import LAW_GID, PREDICT_GID, REFIT_GID, plot_transfer
    from analysis.transfer.transfer import fit_transfer

    runs, _ = synthetic_sweep(TRUTH, SIZES, rng=2)
    fit = fit_transfer(runs, ("N",), "optim.lr")
    far = ({"N": 1e300}, *fit.predict(N=1e300))
    near = ({"N": 1e7}, *fit.predict(N=1e7))
    right = plot_transfer(fit, None, fit, [near, far]).axes[1]  # refit = fit: nothing extra
    gids = [ln.get_gid() for ln in right.get_lines()]
    assert gids.count(LAW_GID) == 1 and REFIT_GID not in gids and gids.count(PREDICT_GID) == 1
    labels = right.get_legend_handles_labels()[1]
    assert sorted(lab for lab in labels if lab.startswith("predicted at")) == [
        f"predicted at N=1e+07: {near[1]:.3g}", f"predicted at N=1e+300: {far[1]:.3g} (off the figure)"]
