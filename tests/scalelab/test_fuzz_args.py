"""Every command's every argument and option, given hostile values one at a time (the
rest of the invocation valid): each call exits 0 or 2 and no exception escapes (no
traceback). Which commands and parameters exist is read from the CLI itself, so a new
option is fuzzed without anyone listing it; a command missing from ``BASE`` fails
``test_every_command_has_a_base_invocation``.

Commands that would train much (``demo``, ``tune``, ``sweep`` without ``--dry-run``) keep
a guard in their base invocation that stops them after every argument has been parsed and
checked (an unknown executor, ``--dry-run``), so a hostile value that happens to be valid
costs nothing.

Every numeric option (an ``int`` or ``float`` parameter, read from the CLI's own parameter
types) also gets ``NUMERIC_HOSTILE``: values that size work or memory without bound, and
non-finite ones. Each such call must also stay under ``PEAK_RSS`` of resident memory: the
process's peak is reset before the call (``/proc/self/clear_refs``) and read after it
(``VmHWM``), and the call runs under an address-space limit, so a runaway allocation fails
the test instead of the machine.
"""

from __future__ import annotations

import contextlib
import functools
import resource
import sys
import warnings
from pathlib import Path

import pytest
import typer
import yaml

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "analysis"))
from _fuzz import run_cli  # noqa: E402
from _tiny_sweep import SPEC, build  # noqa: E402
from test_bounded_work import ensemble_sweep  # noqa: E402

REPO = Path(__file__).resolve().parents[2]

HOSTILE = ("", "-1", "1e400", "9" * 400, "x", "/dev/zero", "{dir}", "a\nb\x1b[31m")
"""Values no command should trip over: empty, negative, an overflowing float, a 400-digit
integer, junk, a device file, a directory, control characters."""

TINY_TRAIN = {
    "name": "fuzz-train",
    "model": {"preset": "cpu-50k"},
    "data": {"dataset": "default", "seq_len": 16, "unique_tokens": 512, "epochs": 1, "val_tokens": 1024},
    "optim": {"name": "adamw", "lr": 3.0e-3},
    "train": {"batch_size": 8, "eval_every": 4, "eval_batches": 1, "checkpoint_every": 1000, "device": "cpu"},
}

BASE: dict[str, tuple[list[str], list[str]]] = {
    "train": (["{train_cfg}"], ["--run-dir", "{tmp}/train_run", "-q"]),
    "ensemble": (["{ensemble}"], ["--device", "cpu"]),
    "next": (["{sweep}"], ["-o", "{tmp}/next.yaml"]),
    "sweep": (["{spec}"], ["--dry-run", "--root", "{tmp}/sweeps"]),
    "status": (["{sweep}"], []),
    "retry": (["{sweep}"], ["--executor", "debug"]),
    "collect": (["{sweep}"], ["-q"]),
    "fit": (["{sweep}"], ["-q", "--bootstrap", "0", "--out", "{tmp}/fit"]),
    "report": (["{sweep}"], ["-q", "--bootstrap", "0"]),
    "explain": (["{run_a}", "{run_b}"], []),
    "tune": (["{spec}"], ["--root", "{tmp}/tune", "--executor", "no-such-executor"]),
    "demo": ([], ["--root", "{tmp}/demo", "--executor", "no-such-executor"]),
    "compare": (["{sweep}", "regularized", "standard"], ["--n-boot", "20"]),
    "transfer": (["{sweep}"], ["--hp", "optim.weight_decay", "--out", "{tmp}/transfer"]),
    "data prepare": (["{file}"], ["--out", "{tmp}/tokens"]),
    "data info": (["{tmp}/no-tokens"], []),
}
"""A valid (or, for the guarded commands, harmless) invocation of each command: its
arguments in order, then its options."""

GUARDS = {("tune", "executor"), ("demo", "executor"), ("sweep", "dry_run")}
"""Parameters never fuzzed: the guards that keep a valid hostile value from training."""

NUMERIC_HOSTILE = ("1e8", "1e20", str(10**8), str(10**20), "nan", "inf")
"""For numeric options, besides ``HOSTILE`` (which has -1 and ''): 10^8 and 10^20 spelled as
floats and as integers (an integer option refuses the float spelling at parsing, so the
integer spelling is what reaches the command's own bound), and the non-finite floats."""
PEAK_RSS = 2 << 30
"""The peak resident memory (bytes) of the test process during one numeric-option call."""
HEADROOM = 3 << 30
"""Address space a numeric-option call may add to the process's before allocation fails."""


@functools.cache
def _commands() -> dict[str, list]:
    """Every leaf command of the CLI -> its parameters (help excluded)."""
    import scalelab.cli as cli

    found: dict[str, list] = {}

    def walk(cmd, path):
        if hasattr(cmd, "commands"):
            for name, sub in cmd.commands.items():
                walk(sub, [*path, name])
        else:
            found[" ".join(path)] = [p for p in cmd.params if p.name != "help"]

    walk(typer.main.get_command(cli.app), [])
    return found


def _cases() -> list[tuple[str, str, str]]:
    cases = []
    for command, params in _commands().items():
        for param in params:
            if getattr(param, "is_flag", False) or (command, param.name) in GUARDS:
                continue
            cases += [(command, param.name, value) for value in HOSTILE]
    return cases


def _is_numeric(param) -> bool:
    """Whether ``param`` takes a number: its annotation (typer's ``type_descriptor``) or
    click type is int or float, possibly Optional."""
    import types
    import typing

    tp = getattr(getattr(param, "type_descriptor", None), "annotation", None)
    if tp is None:  # click's own parameter type
        name = getattr(getattr(param, "type", None), "name", "")
        return name in ("integer", "float", "integer range", "float range")
    if typing.get_origin(tp) in (typing.Union, types.UnionType):
        args = [a for a in typing.get_args(tp) if a is not type(None)]
        tp = args[0] if len(args) == 1 else None
    return tp in (int, float)


def _numeric_cases() -> list[tuple[str, str, str]]:
    return [(command, param.name, value) for command, params in _commands().items()
            for param in params if _is_numeric(param) and (command, param.name) not in GUARDS
            for value in NUMERIC_HOSTILE]


def test_every_command_has_a_base_invocation():
    assert sorted(_commands()) == sorted(BASE)


@pytest.fixture(scope="module")
def world(tmp_path_factory) -> dict[str, str]:
    """The files the base invocations name: a trained sweep, a tiny train config, ..."""
    root = tmp_path_factory.mktemp("fuzz_args")
    sweep = build(root)
    runs = sorted(p for p in (sweep / "runs").iterdir() if p.is_dir())
    cfg = root / "train.yaml"
    cfg.write_text(yaml.safe_dump(TINY_TRAIN))
    spec = root / "spec.yaml"
    spec.write_text(yaml.safe_dump(SPEC, sort_keys=False))
    (root / "a_dir").mkdir()
    (root / "a_file.txt").write_text("plain text\n")
    table = root / "runs.csv"  # a table of runs from any trainer (README "Bring your own runs")
    table.write_text("N,D,loss,recipe,seed,lr\n" + "".join(
        f"{n},1e6,{e + 0.05 / (n / 1e6) ** 0.4 + 0.05 * (lr - 1) ** 2 + 0.001 * s},{r},{s},{lr}\n"
        for r, e in (("a", 2.2), ("b", 2.0)) for n in (1e4, 2e4, 4e4, 8e4, 1.6e5)
        for lr in (0.5, 1.0, 2.0) for s in (0, 1)))
    (root / "a_dir.csv").mkdir()
    return {"table": str(table), "sweep": str(sweep), "spec": str(spec), "train_cfg": str(cfg), "run_a": str(runs[0]),
            "ensemble": str(ensemble_sweep(root)),
            "run_b": str(runs[1]), "dir": str(root / "a_dir"), "missing": str(root / "missing"),
            "file": str(root / "a_file.txt")}


def _invocation(command: str, param, value: str, world: dict[str, str], tmp: Path,
                base: dict = BASE) -> list[str]:
    """``base[command]`` with ``param`` set to ``value`` (an argument replaced in place,
    an option replaced or added)."""
    names = {**world, "tmp": str(tmp)}
    positional, options = ([a.format(**names) for a in part] for part in base[command])
    value = value.format(**names) if value.startswith("{") else value
    if param.param_type_name == "argument":
        arguments = [p for p in _commands()[command] if p.param_type_name == "argument"]
        index = arguments.index(param)
        positional = positional[:index] + [value] + positional[index + 1:]
    else:
        spelled = [o for o in param.opts if o in options]
        if spelled:
            options[options.index(spelled[0]) + 1] = value
        else:
            options += [param.opts[0], value]
    return [*command.split(), *positional, *options]


@pytest.mark.parametrize(("command", "param_name", "value"), _cases(),
                         ids=[f"{c}:{p}:{v[:12]!r}" for c, p, v in _cases()])
def test_hostile_argument_gives_one_line_never_a_traceback(world, tmp_path, monkeypatch, command,
                                                          param_name, value):
    monkeypatch.chdir(tmp_path)  # a relative path a value names lands here
    param = next(p for p in _commands()[command] if p.name == param_name)
    args = _invocation(command, param, value, world, tmp_path)
    outcome = run_cli(args)
    assert outcome.ok, outcome.describe(args)


def test_numeric_options_are_detected():
    """The detection reads the CLI's types: it finds the known numeric options."""
    found = {(c, p) for c, p, _ in _numeric_cases()}
    assert {("ensemble", "batches"), ("ensemble", "batch_size"), ("fit", "bootstrap"),
            ("compare", "level"), ("next", "n"), ("tune", "n_trials")} <= found
    assert ("ensemble", "device") not in found and len(found) >= 15


@contextlib.contextmanager
def _peak_rss():
    """Yields a callable giving the peak resident memory (bytes) since entry; allocations
    past ``HEADROOM`` more address space fail (MemoryError) instead of exhausting the host."""
    def status(key: str) -> int:
        with open("/proc/self/status") as fh:
            line = next(line for line in fh if line.startswith(key + ":"))
        return int(line.split()[1]) << 10

    with open("/proc/self/clear_refs", "w") as fh:  # resets VmHWM to the current RSS
        fh.write("5")
    soft, hard = resource.getrlimit(resource.RLIMIT_AS)
    limit = status("VmSize") + HEADROOM
    resource.setrlimit(resource.RLIMIT_AS, (limit if hard == resource.RLIM_INFINITY else min(limit, hard), hard))
    try:
        yield lambda: status("VmHWM")
    finally:
        resource.setrlimit(resource.RLIMIT_AS, (soft, hard))


@pytest.mark.skipif(not Path("/proc/self/clear_refs").exists(), reason="needs Linux's /proc")
@pytest.mark.parametrize(("command", "param_name", "value"), _numeric_cases(),
                         ids=[f"{c}:{p}:{v[:12]!r}" for c, p, v in _numeric_cases()])
def test_huge_and_non_finite_numbers_give_one_line_and_bounded_memory(world, tmp_path, monkeypatch, command,
                                                                      param_name, value):
    monkeypatch.chdir(tmp_path)
    param = next(p for p in _commands()[command] if p.name == param_name)
    args = _invocation(command, param, value, world, tmp_path)
    with _peak_rss() as peak:
        outcome = run_cli(args)
        used = peak()
    assert outcome.ok, outcome.describe(args)
    assert used < PEAK_RSS, f"peak RSS {used / 2**30:.2f} GiB: {outcome.describe(args)}"


TABLE_BASE: dict[str, tuple[list[str], list[str]]] = {
    "fit": (["{table}"], ["-q", "--bootstrap", "0", "--out", "{tmp}/fit"]),
    "report": (["{table}"], ["-q", "--bootstrap", "0"]),
    "compare": (["{table}", "b", "a"], ["--n-boot", "20"]),
    "transfer": (["{table}"], ["--hp", "lr", "--out", "{tmp}/transfer"]),
}
"""The commands that take a table of runs in place of a sweep, on a small valid CSV."""
TABLE_HOSTILE = (*HOSTILE, "{dir}.csv", "/dev/zero.csv", "x.parquet")
"""For the table argument: the hostile values, and paths that look like tables and are not."""
TABLE_OPTION_HOSTILE = ("", "-1", "x", "{dir}")
"""For the options with a table (the full set runs on the sweep above): a few, to keep time."""


def _table_cases() -> list[tuple[str, str, str]]:
    return [(command, param.name, value) for command in TABLE_BASE
            for param in _commands()[command] if not getattr(param, "is_flag", False)
            for value in (TABLE_HOSTILE if param.param_type_name == "argument"
                          else TABLE_OPTION_HOSTILE)]


@pytest.mark.parametrize(("command", "param_name", "value"), _table_cases(),
                         ids=[f"{c}:{p}:{v[:12]!r}" for c, p, v in _table_cases()])
def test_hostile_argument_on_a_table_of_runs(world, tmp_path, monkeypatch, command, param_name,
                                             value):
    monkeypatch.chdir(tmp_path)
    param = next(p for p in _commands()[command] if p.name == param_name)
    args = _invocation(command, param, value, world, tmp_path, TABLE_BASE)
    outcome = run_cli(args)
    assert outcome.ok, outcome.describe(args)


PREDICT_HOSTILE = ("N=1e400", "N=-1", "N=0", "N=nan", "N=inf", "n=1e9", "D=1e9", "N=1e9,D=1e9",
                   "N=1e9,", "N==1", "=1", ",", "N=1e300", "N=5e-324", "N=1.7e308", "N=1e-300",
                   "N=0x10", "N=1_000", "N=" + "9" * 400, "N=1e9\nD=1")
"""For ``transfer --predict``: besides ``HOSTILE`` (run above like every option), points a
law could choke on: names it does not use, values at and beyond the float range, a
prediction so far out that its hp* and the figure's axes leave the float range."""
PREDICT_VALID = ("N=1e300", "N=5e-324", "N=1.7e308", "N=1e-300", "N=1_000")
"""Of those, the points a law in N predicts (far out: named in the figure's legend only)."""


LAW_BASE = {"transfer": (["{law_sweep}"], ["--hp", "optim.lr", "--holdout-largest", "1",
                                         "--out", "{tmp}/transfer"])}
"""A sweep whose lr law fits (the tiny sweep's weight decay has 2 values per size: refused
before any prediction), with norms records and a held-out refit in the figure."""


@pytest.fixture(scope="module")
def law_world(world, tmp_path_factory) -> dict[str, str]:
    """``world`` and ``law_sweep``: a synthetic sweep (known lr law, 6 sizes, norms)."""
    import os

    import numpy as np
    import polars as pl

    from analysis.synthetic.transfer import TransferTruth, synthetic_sweep
    from analysis.tables.layout import NORMS_FILE, RUNS_FILE, RUNS_FOLDER

    sweep = tmp_path_factory.mktemp("fuzz_law") / "sweep"
    runs, norms = synthetic_sweep(TransferTruth(), np.geomspace(5e3, 3e5, 6), rng=1)
    for rid in runs["run_id"]:
        (sweep / RUNS_FOLDER / f"run-{rid}").mkdir(parents=True)
        norms.filter(pl.col("run_id") == rid).write_parquet(sweep / RUNS_FOLDER / f"run-{rid}" / NORMS_FILE)
    runs.with_columns(pl.format("{}/run-{}", pl.lit(RUNS_FOLDER), pl.col("run_id")).alias("run_dir")
                      ).write_parquet(sweep / RUNS_FILE)
    later = (sweep / RUNS_FILE).stat().st_mtime + 60  # fresh: no collect
    os.utime(sweep / RUNS_FILE, (later, later))
    return {**world, "law_sweep": str(sweep)}


@pytest.mark.parametrize("base", [BASE, TABLE_BASE, LAW_BASE], ids=["sweep", "table", "law"])
@pytest.mark.parametrize("value", PREDICT_HOSTILE)
def test_hostile_transfer_predict(law_world, tmp_path, monkeypatch, base, value):
    monkeypatch.chdir(tmp_path)
    param = next(p for p in _commands()["transfer"] if p.name == "predict")
    args = _invocation("transfer", param, value, law_world, tmp_path, base)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        outcome = run_cli(args)
    assert outcome.ok, outcome.describe(args)
    overflow = [str(w.message) for w in caught if issubclass(w.category, RuntimeWarning)]
    assert not overflow, (overflow, outcome.describe(args))  # e.g. exp overflow on an axis
    if base is LAW_BASE and value in PREDICT_VALID:  # printed, and the figure saved
        assert outcome.code == 0, outcome.describe(args)
