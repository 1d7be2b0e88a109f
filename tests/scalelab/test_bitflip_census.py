"""A census of single-bit flips in a sweep's own files (``plan.parquet``, ``runs.parquet``,
the ``spec.yaml`` copy): 0 silent changes.

A flip must be detected (a one-line ``UserError`` naming the file, exit 2 at the CLI) or,
for the derived ``runs.parquet``, repaired (collected again), or leave what every reader
returns equal to the undamaged sweep's. Before these files had manifests, 26 flips of an
adversarial pass changed results with exit 0 (an ``N_non_embedding`` of 24,480 read as
8,589,959,072; every ``model.preset`` read as ``twin)...``; lr values shuffled across runs).

``CENSUS_FLIPS`` flips (a fixed seed: the bit positions are the same every run), split
over the three files, each followed by the readers the commands use, in this process:
``read_plan`` (``status``, ``collect``, ``retry``, ``sweep``), ``sweep_spec`` and
``current_run_ids`` (``sweep``/``retry`` from a directory, ``collect``'s ``in_spec``) and
``read_runs_table`` (``fit``, ``report``, ``compare``, ``next``: collected again when stale).
A few flips also go through the CLI end to end (``status``, ``report``), whose outputs
must be the undamaged sweep's byte for byte or exit 2 with one line.
"""

from __future__ import annotations

import contextlib
import hashlib
import io
import json
import random
import shutil
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "analysis"))
from _fuzz import run_cli  # noqa: E402
from _shared_sweep import shared_tiny_sweep  # noqa: E402

pytestmark = pytest.mark.slow

CENSUS_FLIPS = {"plan.parquet": 80, "runs.parquet": 70, "spec.yaml": 60}
"""Flips per file: 210 in all (the acceptance asks for at least 200)."""
SEED = 20260
CLI_FLIPS = 3
"""Flips per file also run through ``scalelab status`` and ``scalelab report``."""


@pytest.fixture(scope="module")
def pristine(tmp_path_factory) -> Path:
    return shared_tiny_sweep(tmp_path_factory)


def _readers(sweep: Path) -> dict:
    """What each reader gives for ``sweep``: a value, or ('error', the one line)."""
    from scalelab.cli.runs_table import read_runs_table
    from scalelab.errors import UserError
    from scalelab.sweep.run.launch import read_plan, sweep_spec
    from scalelab.sweep.view.current import current_run_ids

    def spec_view():
        spec = sweep_spec(sweep)
        return None if spec is None else (spec.text, repr(spec))

    calls = {"plan": lambda: read_plan(sweep), "spec": spec_view,
             "in_spec": lambda: current_run_ids(sweep), "runs": lambda: read_runs_table(sweep)}
    out = {}
    for name, call in calls.items():
        try:
            with contextlib.redirect_stdout(io.StringIO()):
                out[name] = call()
        except UserError as err:
            out[name] = ("error", str(err))
        except Exception as err:  # noqa: BLE001 - a traceback at the CLI: the census counts it
            out[name] = ("crash", f"{type(err).__name__}: {err}")
    return out


def _same(a, b) -> bool:
    import polars as pl

    if isinstance(a, pl.DataFrame) and isinstance(b, pl.DataFrame):
        return a.equals(b, null_equal=True) and a.columns == b.columns and a.dtypes == b.dtypes
    return a == b


def _flips(pristine: Path) -> list[tuple[str, int]]:
    rng = random.Random(SEED)
    out = []
    for name, n in CENSUS_FLIPS.items():
        bits = (pristine / name).stat().st_size * 8
        out += [(name, b) for b in rng.sample(range(bits), n)]
    return out


def _flip(path: Path, bit: int) -> None:
    data = bytearray(path.read_bytes())
    data[bit // 8] ^= 1 << (bit % 8)
    path.write_bytes(bytes(data))


def _vouched(path: Path) -> bool:
    """``path`` matches the manifest beside it (``<name>.manifest.json``: size, sha256)."""
    manifest = path.with_name(path.name + ".manifest.json")
    if not manifest.is_file():
        return False
    doc, data = json.loads(manifest.read_text()), path.read_bytes()
    return doc.get("size") == len(data) and doc.get("sha256") == hashlib.sha256(data).hexdigest()


def _restore(pristine: Path, sweep: Path) -> None:
    """The sweep's own files as they were, runs.parquet last (so it is the newest: fresh)."""
    for name in ("plan.parquet", "spec.yaml", "runs.parquet"):
        for path in sorted(pristine.glob(name + "*")):
            shutil.copyfile(path, sweep / path.name)


def test_no_single_bit_flip_in_a_sweep_file_changes_a_result_silently(pristine, tmp_path):
    sweep = tmp_path / "root" / pristine.name
    shutil.copytree(pristine, sweep, symlinks=True)
    base = _readers(sweep)
    assert not any(isinstance(v, tuple) and v[:1] == ("error",) for v in base.values()), base
    counts = {"detected": 0, "repaired": 0, "identical": 0}
    silent = []
    flips = _flips(pristine)
    for name, bit in flips:
        _restore(pristine, sweep)
        _flip(sweep / name, bit)
        got = _readers(sweep)
        errors = [v[1] for v in got.values() if isinstance(v, tuple) and v[:1] == ("error",)]
        crashed = [f"{k}: {v[1]}" for k, v in got.items() if isinstance(v, tuple) and v[:1] == ("crash",)]
        changed = [k for k, v in got.items() if not (isinstance(v, tuple) and v[:1] in (("error",), ("crash",)))
                   and not _same(v, base[k])]
        if crashed:
            silent.append(f"{name} bit {bit}: a traceback, not one line: {crashed}")
        if changed:
            silent.append(f"{name} bit {bit}: {changed} changed with no error")
        for line in errors:
            if "\n" in line or name not in line:
                silent.append(f"{name} bit {bit}: an error that is not one line naming it: {line!r}")
        if errors:
            counts["detected"] += 1
        elif name == "runs.parquet":  # collected again, with its manifest
            counts["repaired"] += 1
            if not _vouched(sweep / name):
                silent.append(f"{name} bit {bit}: read with no error, and not collected again")
        else:
            counts["identical"] += 1
    print(f"census: {len(flips)} flips, {counts}")
    assert not silent, f"{len(silent)} silent change(s) of {len(flips)}:\n" + "\n".join(silent[:20])
    assert sum(counts.values()) == len(flips) >= 200
    # every flip is caught by the sha256 of its manifest: none slips through as "identical"
    assert counts["identical"] == 0, counts


def test_flips_through_the_cli_are_one_line_or_the_same_report(pristine, tmp_path):
    """``scalelab status`` and ``scalelab report`` on a few flips of each file: exit 2 with
    one line naming the file, or exit 0 with report.md byte-identical to the undamaged
    sweep's (runs.parquet collected again)."""
    sweep = tmp_path / "root" / pristine.name
    shutil.copytree(pristine, sweep, symlinks=True)
    report = ["report", str(sweep), "-q", "--bootstrap", "0"]
    assert run_cli(report).code == 0
    want = (sweep / "report" / "report.md").read_bytes()
    rng = random.Random(SEED + 1)
    for name in CENSUS_FLIPS:
        bits = (pristine / name).stat().st_size * 8
        for bit in rng.sample(range(bits), CLI_FLIPS):
            _restore(pristine, sweep)
            shutil.rmtree(sweep / "report", ignore_errors=True)
            _flip(sweep / name, bit)
            for args in (["status", str(sweep)], report):
                outcome = run_cli(args)
                assert outcome.ok, outcome.describe(args)
                if outcome.code == 2:
                    lines = outcome.stderr.strip().splitlines()
                    assert len(lines) == 1 and name in lines[0], (name, bit, outcome.stderr)
                elif args is report:
                    assert name == "runs.parquet", (name, bit, "exit 0 after a flip")
                    assert (sweep / "report" / "report.md").read_bytes() == want, (name, bit)
