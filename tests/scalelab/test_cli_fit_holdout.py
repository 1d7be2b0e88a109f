"""``scalelab fit --holdout-largest K`` (docs/extrapolation.md): the report's extrapolation
check, one line per fitted group, on synthetic sweeps drawn from a known law with known noise.

The CLI's held-out predictions and intervals must be those of a direct call of the engine
(``extrapolation.holdout_check`` for K = 1, 2; ``holdout_largest`` for any K) on the same
points: absolute tolerance 1e-9 nats (the same deterministic refit; parquet keeps float64).
"""

from __future__ import annotations

import json

import numpy as np
import polars as pl
import pytest
from _cli_exit import exit_code as run

from analysis.fit.power_law import SCALE
from analysis.recipes.extrapolation import holdout_check, holdout_largest

pytestmark = pytest.mark.filterwarnings("ignore::analysis.errors.IdentifiabilityWarning")

N = np.round(np.geomspace(5608, 270816, 8))  # the demo's sizes: 5.6k .. 271k
A, B, E, SIGMA = 0.05, 0.6, 2.0, 0.01
TOL = 1e-9  # nats: CLI vs a direct call of the engine


def truth(n: np.ndarray) -> np.ndarray:
    return A * (n / SCALE) ** -B + E


def _losses(seed: int) -> np.ndarray:
    return truth(N) + SIGMA * np.random.default_rng(seed).standard_normal(N.size)


def _sweep(path, loss: np.ndarray | None, groups: dict[str, np.ndarray] | None = None):
    """A sweep directory holding only runs.parquet: one COMPLETED run per (group, size)."""
    path.mkdir()
    parts = groups or {"": loss}
    frames = [pl.DataFrame({"N": N, "D": 20 * N, "U": 20 * N, "loss": y,
                            "state": ["COMPLETED"] * N.size, "arm": [name] * N.size})
              for name, y in parts.items()]
    pl.concat(frames).write_parquet(path / "runs.parquet")
    return path



def _fit(sweep, tmp_path, *extra) -> tuple[list[str], dict]:
    stem = tmp_path / "out" / "fit"
    code = run(["fit", sweep, "-q", "--bootstrap", "0", "--out", stem, *extra])
    assert code == 0
    doc = json.loads((tmp_path / "out" / "fit-holdout.json").read_text())
    return doc, stem


@pytest.mark.parametrize("k", [1, 2, 3])
def test_held_out_prediction_is_the_engines_and_covers_the_truth(tmp_path, capsys, k):
    y = _losses(0)
    sweep = _sweep(tmp_path / "sweep", y)
    doc, stem = _fit(sweep, tmp_path, "--holdout-largest", k)
    assert stem.with_suffix(".png").is_file()  # the held-out predictions are drawn on it
    direct = (holdout_check(N / SCALE, y, k) if k <= 2 else holdout_largest(N / SCALE, y, k))
    out = capsys.readouterr().out.splitlines()
    assert f"powerlaw vs N: {direct.line()}" in out  # the report's format, one line
    (g,) = doc["groups"]
    assert g["checked"] and len(g["points"]) == k == len(direct.points)
    for got, want in zip(g["points"], direct.points):
        assert got["N"] == pytest.approx(want.x * SCALE, abs=TOL)
        for key in ("predicted", "lo", "hi", "observed"):
            assert got[key] == pytest.approx(getattr(want, key), abs=TOL)
        assert got["lo"] <= truth(np.array([got["N"]]))[0] <= got["hi"]  # the truth is covered
        assert got["covered"]
    assert g["refit"]["B"] == pytest.approx(direct.refit[1], abs=TOL)


def test_a_law_that_bends_away_is_not_covered(tmp_path, capsys):
    """The largest size 0.1 nats (10 sigma) above the law, as an overfitting recipe's rise."""
    y = _losses(0)
    y[-1] += 0.1
    doc, _ = _fit(_sweep(tmp_path / "sweep", y), tmp_path, "--holdout-largest", "1")
    (line,) = [s for s in capsys.readouterr().out.splitlines() if s.startswith("powerlaw vs N")]
    assert line.startswith("powerlaw vs N: held out N = 271k: ") and line.endswith("NOT covered")
    (p,) = doc["groups"][0]["points"]
    assert not p["covered"] and p["error"] > 0.08


def test_one_line_per_group(tmp_path, capsys):
    bent = _losses(1)
    bent[-1] += 0.1
    sweep = _sweep(tmp_path / "sweep", None, {"good": _losses(0), "bent": bent})
    doc, stem = _fit(sweep, tmp_path, "--group-by", "arm", "--holdout-largest", "1")
    lines = [s for s in capsys.readouterr().out.splitlines() if " vs N: " in s]
    assert [s.split(":")[0] for s in lines] == ["arm=bent vs N", "arm=good vs N"]
    assert lines[0].endswith("NOT covered") and lines[1].endswith(", covered")
    assert [g["group"] for g in doc["groups"]] == [{"arm": "bent"}, {"arm": "good"}]
    assert stem.with_name("fit-arm=bent.png").is_file()


def test_off_by_default(tmp_path, capsys):
    sweep = _sweep(tmp_path / "sweep", _losses(0))
    assert run(["fit", sweep, "-q", "--bootstrap", "0", "--out", tmp_path / "o" / "fit"]) == 0
    assert "held out" not in capsys.readouterr().out
    assert not (tmp_path / "o" / "fit-holdout.json").exists()


@pytest.mark.parametrize("extra, message", [
    (["--holdout-largest", "-1"], "--holdout-largest: expected an integer >= 0"),
    (["--holdout-largest", "5"],
     "--holdout-largest: 5 leaves 3 of 8 distinct N values; the refit of powerlaw's 3 "
     "parameters needs >= 4"),
    (["--group-by", "arm", "--holdout-largest", "5"],
     "5 leaves 3 of 8 distinct N values in group arm=a;"),
    # A law of (N, D) is offered since issue 35 (analysis/fit/prediction.py); it refuses a K
    # that leaves fewer than 2 distinct N.
    (["--law", "chinchilla", "--holdout-largest", "7"],
     "--holdout-largest: 7 leaves 1 of 8 distinct N values; the refit of chinchilla needs >= 2"),
    (["--isoflop", "--holdout-largest", "1"], "--isoflop fits no law to extrapolate"),
])
def test_refusals_exit_2_with_one_line(tmp_path, capsys, extra, message):
    y = _losses(0)
    groups = {"a": y, "b": y[:-1]} if "--group-by" in extra else None
    if groups:  # group b has 7 sizes, a has 8: the refusal names the first short group
        sweep = tmp_path / "sweep"
        sweep.mkdir()
        pl.concat([pl.DataFrame({"N": N[: y.size], "D": 20 * N[: y.size], "U": 20 * N[: y.size],
                                 "loss": y, "state": ["COMPLETED"] * y.size,
                                 "arm": [name] * y.size})
                   for name, y in groups.items()]).write_parquet(sweep / "runs.parquet")
    else:
        sweep = _sweep(tmp_path / "sweep", y)
    assert run(["fit", sweep, "-q", "--bootstrap", "0", "--out", tmp_path / "o" / "f", *extra]) == 2
    err = capsys.readouterr().err
    assert message in err and "Traceback" not in err and len(err.strip().splitlines()) == 1
