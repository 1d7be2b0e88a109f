"""``scalelab fit --profile``: each free parameter's profile-likelihood interval, one line per
parameter (and group), each end marked by how it was found (analysis/fit/profile.py,
docs/fit_diagnostics.md). The printed line is the library's ``Profile.describe()`` for the
same fit; an end the data leave open reads [box]."""

from __future__ import annotations

import numpy as np
import polars as pl
import pytest
from _cli_exit import exit_code as _run

from analysis import PowerLaw, fit_law

pytestmark = pytest.mark.filterwarnings("ignore::analysis.errors.IdentifiabilityWarning")

N = np.geomspace(0.05, 5.0, 12)


def _sweep(path, loss) -> object:
    path.mkdir()
    pl.DataFrame({"N": N * 1e6, "D": 20e6 * N, "loss": loss,
                  "state": ["COMPLETED"] * N.size}).write_parquet(
        path / "runs.parquet")
    return path



def test_profile_lines_are_the_librarys(tmp_path, capsys):
    rng = np.random.default_rng(0)
    loss = 0.3 * N**-0.4 + 2.0 + 0.002 * rng.standard_normal(N.size)
    sweep = _sweep(tmp_path / "s", loss)
    code = _run(["fit", sweep, "--bootstrap", "0", "--profile", "--out", tmp_path / "o" / "f"])
    out = capsys.readouterr().out
    assert code == 0, out
    lines = [ln for ln in out.splitlines() if ln.startswith("profile: ")]
    direct = fit_law(PowerLaw(), pl.DataFrame({"N": N, "loss": loss}), warn=False)
    want = [f"profile: {direct.profile(p).describe()}" for p in direct.free]
    assert len(lines) == len(direct.free) == 3
    # the CLI fits N in parameters, the direct fit in millions: compare the exponent and E,
    # which do not depend on the unit of N
    for got, exp in zip(lines, want):
        name = exp.split(":")[1].split("=")[0].strip()
        if name in ("alpha", "E"):
            assert got == exp, (got, exp)
    assert all("[profile]" in ln for ln in lines if ln.split(":")[1].strip().startswith("E ="))


def test_profile_is_refused_with_isoflop(tmp_path, capsys):
    sweep = _sweep(tmp_path / "s", 0.3 * N**-0.4 + 2.0)
    assert _run(["fit", sweep, "--isoflop", "--profile"]) == 2
    err = capsys.readouterr().err
    assert "--profile" in err and "Traceback" not in err and len(err.strip().splitlines()) == 1
