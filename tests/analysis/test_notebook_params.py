"""Notebook parameters from outside the notebook (``analysis.plots.notebook_params``): the
command line when a notebook runs as a script, else ``SCALELAB_NB_<NAME>``, else the default;
a kernel's argv is ignored; a bad parameter is one line and exit 2."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from _waits import CEILING_S

from analysis.errors import AnalysisInputError
from analysis.plots.notebook_params import ENV_PREFIX, read_parameters

NOTEBOOKS = Path(__file__).resolve().parents[2] / "analysis" / "notebooks"
TRANSFER = NOTEBOOKS / "04_transfer_laws.py"
DEFAULTS = {"SWEEP": "", "N_BOOT": 200, "LEVEL": 0.95, "PLOT": True, "WHERE": []}
KERNEL_ARGV = ["/venv/lib/python3.12/site-packages/ipykernel_launcher.py", "-f",
               "/home/u/.local/share/jupyter/runtime/kernel-1234.json"]


def _read(argv=(), env=None):
    return read_parameters(DEFAULTS, ["nb.py", *argv], env or {})[0]


def test_defaults_then_environment_then_command_line():
    assert _read() == DEFAULTS
    env = {f"{ENV_PREFIX}SWEEP": "runs/env", f"{ENV_PREFIX}N_BOOT": "7",
           f"{ENV_PREFIX}WHERE": "block=a; seed=0;", "SCALELAB_SWEEP": "ignored"}
    assert _read(env=env) == {**DEFAULTS, "SWEEP": "runs/env", "N_BOOT": 7,
                              "WHERE": ["block=a", "seed=0"]}
    got = _read(["--sweep", "runs/cli", "n_boot=3", "--level=0.8", "--where", "a=1",
                 "--WHERE", "b=2", "--plot", "false"], env)
    assert got == {"SWEEP": "runs/cli", "N_BOOT": 3, "LEVEL": 0.8, "PLOT": False,
                   "WHERE": ["a=1", "b=2"]}
    assert type(got["N_BOOT"]) is int and type(got["LEVEL"]) is float


def test_bool_flags_and_dashes():
    assert _read(["--plot"])["PLOT"] is True
    assert _read(["--plot", "--n-boot", "5"]) == {**DEFAULTS, "N_BOOT": 5}
    assert _read(env={f"{ENV_PREFIX}PLOT": "off"})["PLOT"] is False
    assert read_parameters({"BEST_OVER": ""}, ["nb", "--best-over", "optim.lr"], {})[0] == {
        "BEST_OVER": "optim.lr"}


def test_a_kernels_argv_is_ignored():
    env = {f"{ENV_PREFIX}SWEEP": "runs/env"}
    assert read_parameters(DEFAULTS, KERNEL_ARGV, env)[0] == {**DEFAULTS, "SWEEP": "runs/env"}
    assert read_parameters(DEFAULTS, [*KERNEL_ARGV, "--bogus", "1"], {})[0] == DEFAULTS
    for launcher in ("/usr/lib/python3/site-packages/ipykernel/__main__.py",
                     "/usr/local/lib/python3/dist-packages/colab_kernel_launcher.py"):
        assert read_parameters(DEFAULTS, [launcher, "-f", "k.json", "--x"], env)[0]["SWEEP"] == \
            "runs/env"
    # a script given a kernel's connection file (as some launchers pass it) skips that pair
    assert _read(["-f", "/tmp/kernel.json", "--sweep", "x"])["SWEEP"] == "x"
    assert _read(["--f=/tmp/kernel-1.json"]) == DEFAULTS


@pytest.mark.parametrize(("argv", "env", "message"), [
    (["--sweeep", "x"], {}, "unknown parameter --sweeep (did you mean 'SWEEP'?)"),
    (["N_BOTO=3"], {}, "unknown parameter N_BOTO (did you mean 'N_BOOT'?)"),
    (["stray"], {}, "unexpected argument 'stray'"),
    (["--n-boot", "ten"], {}, "N_BOOT (from --n-boot) must be an integer, got 'ten'"),
    (["--plot=maybe"], {}, "PLOT (from --plot) must be true or false, got 'maybe'"),
    ([], {f"{ENV_PREFIX}LEVEL": "high"}, "LEVEL (from SCALELAB_NB_LEVEL) must be a number"),
    (["--sweep", "a", "--sweep", "b"], {}, "SWEEP given twice"),
    (["--sweep"], {}, "--sweep needs a value (text)"),
])
def test_bad_parameters_are_one_line(argv, env, message):
    with pytest.raises(AnalysisInputError) as err:
        _read(argv, env)
    assert message in str(err.value) and "\n" not in str(err.value)


def test_unknown_environment_variables_are_another_notebooks():
    env = {f"{ENV_PREFIX}HP": "optim.lr", f"{ENV_PREFIX}SWEPE": "runs/x"}
    values, notes = read_parameters(DEFAULTS, ["nb"], env)
    assert values == DEFAULTS
    assert notes == [("SCALELAB_NB_SWEPE is not a parameter of this notebook "
                      "(did you mean 'SWEEP'?): ignored")]


def _run(path: Path, args: list[str], env: dict[str, str]) -> subprocess.CompletedProcess:
    base = {k: v for k, v in os.environ.items() if not k.startswith(ENV_PREFIX)}
    return subprocess.run([sys.executable, str(path), *args], env={**base, "MPLBACKEND": "Agg", **env},
                          capture_output=True, text=True, timeout=CEILING_S, check=False)


@pytest.fixture(scope="module")
def transfer_sweep(tmp_path_factory) -> Path:
    """A directory holding only a runs.parquet: a synthetic lr sweep whose truth is
    lr* = 0.3118 C^-0.125 over six budgets."""
    from analysis.synthetic.transfer import TransferTruth, synthetic_sweep
    from analysis.tables.layout import runs_file

    sweep = tmp_path_factory.mktemp("transfer_sweep")
    runs, _ = synthetic_sweep(TransferTruth(c=0.3118, a=(-0.125,)), np.geomspace(1e17, 1e20, 6),
                              x=("C",), hp="optim.lr", rng=0)
    runs.write_parquet(runs_file(sweep))
    return sweep


def test_a_script_reads_its_parameters_from_the_command_line(transfer_sweep, tmp_path):
    """The command line wins over the environment (which points at nothing)."""
    env = {f"{ENV_PREFIX}SWEEP": str(tmp_path / "nothing"), f"{ENV_PREFIX}X": "N",
           "ANALYSIS_OUT": str(tmp_path)}
    proc = _run(TRANSFER, ["--sweep", str(transfer_sweep), "X=C", "--holdout=0"], env)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert f"source: sweep {transfer_sweep}; optim.lr against C" in proc.stdout
    assert "law: optim.lr* = c * C^a_C over 6 groups" in proc.stdout
    assert "held out" not in proc.stdout  # HOLDOUT=0
    assert (tmp_path / "transfer_sweep.png").is_file()
    assert not (tmp_path / "transfer_joint_batch.png").exists()  # the no-sweep section skipped


def test_in_a_kernel_the_environment_sets_them(transfer_sweep):
    """Jupyter's argv (``-f kernel.json``) is not the notebook's: the environment applies."""
    env = {f"{ENV_PREFIX}SWEEP": str(transfer_sweep), f"{ENV_PREFIX}X": "C"}
    proc = _run(TRANSFER, ["-f", "/tmp/jupyter/runtime/kernel-0.json"], env)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert f"source: sweep {transfer_sweep}; optim.lr against C" in proc.stdout
    assert "held out C=1e+20" in proc.stdout  # HOLDOUT's default, 1


@pytest.mark.parametrize("name", sorted(p.name for p in NOTEBOOKS.glob("*.py")))
def test_every_notebook_takes_a_missing_sweep_or_bad_parameter_as_one_line(name, tmp_path):
    proc = _run(NOTEBOOKS / name, ["--bogus-param", "1"], {})
    assert proc.returncode == 2 and proc.stdout == ""
    assert proc.stderr.splitlines() == [proc.stderr.strip()]
    assert proc.stderr.startswith(f"{name}: unknown parameter --bogus-param (parameters: ")
    text = (NOTEBOOKS / name).read_text()
    assert f"python analysis/notebooks/{name} --" in text and "SCALELAB_NB_" in text  # how-to
    help_ = _run(NOTEBOOKS / name, ["--help"], {})
    assert help_.returncode == 0 and "SCALELAB_NB_" in help_.stdout
    if "SWEEP=" in help_.stdout or "--sweep" in help_.stdout:
        missing = tmp_path / "no_sweep"
        proc = _run(NOTEBOOKS / name, [], {f"{ENV_PREFIX}SWEEP": str(missing)})
        assert proc.returncode != 0
        assert f"{missing}/runs.parquet is missing" in proc.stderr
