"""The dry-run plan: the (block, size) view at 100 columns against a golden file, ``--runs``,
and ``--format csv|json|parquet`` / ``-o`` (round trips to the plan table, bad input).

The golden file ``golden/plan_200M_tokens.txt`` is what
``COLUMNS=100 scalelab sweep sweeps/200M_tokens.yaml --dry-run`` prints (no colour, on an
empty sweeps root: every run launches). After an intended change of the view, regenerate it
and review the diff:

    SCALELAB_UPDATE_GOLDEN=1 .venv/bin/python -m pytest tests/scalelab/sweep/test_plan_view.py -k golden

(``render_golden`` below is the helper that writes it.)
"""

from __future__ import annotations

import io
import json
import os
import re
import sys
from pathlib import Path

import polars as pl
import pytest
from polars.testing import assert_frame_equal

sys.path.insert(0, str(Path(__file__).resolve().parent))
from lifecycle_helpers import cli

from scalelab.sweep.plan.expand import load_plan

SWEEPS = Path(__file__).resolve().parents[3] / "sweeps"
GOLDEN = Path(__file__).resolve().parent / "golden" / "plan_200M_tokens.txt"
SPEC_200M = SWEEPS / "200M_tokens.yaml"
_SUFFIX = {"K": 1e3, "M": 1e6, "B": 1e9, "T": 1e12}


@pytest.fixture(scope="module")
def plan_200m():
    return load_plan(SPEC_200M)


@pytest.fixture
def plain(monkeypatch):
    """A 100-column terminal without colour, whatever the environment says."""
    for var in ("FORCE_COLOR", "TTY_COMPATIBLE", "TTY_INTERACTIVE", "PAGER"):
        monkeypatch.delenv(var, raising=False)
    monkeypatch.setenv("COLUMNS", "100")
    monkeypatch.setenv("NO_COLOR", "1")


def render_golden(root: Path, capsys) -> str:
    """The dry-run output of sweeps/200M_tokens.yaml (trailing blanks stripped); with
    SCALELAB_UPDATE_GOLDEN=1 it is also written to ``GOLDEN``."""
    assert cli("sweep", str(SPEC_200M), "--dry-run", "--root", str(root)) == 0
    text = "\n".join(line.rstrip() for line in capsys.readouterr().out.splitlines()) + "\n"
    if os.environ.get("SCALELAB_UPDATE_GOLDEN") == "1":
        GOLDEN.write_text(text)
    return text


def number(token: str) -> float:
    """'154M' -> 1.54e8, '1.2e20' -> 1.2e20, '13,450' -> 13450."""
    token = token.replace(",", "")
    if token[-1] in _SUFFIX:
        return float(token[:-1]) * _SUFFIX[token[-1]]
    return float(token)


def test_dry_run_view_matches_golden(tmp_path, capsys, plain, plan_200m):
    text = render_golden(tmp_path, capsys)
    assert GOLDEN.exists(), f"missing {GOLDEN} (SCALELAB_UPDATE_GOLDEN=1 writes it)"
    assert text == GOLDEN.read_text(), f"the dry-run view differs from {GOLDEN}"
    assert "…" not in text and max(map(len, text.splitlines())) <= 100
    t = plan_200m.table
    assert f"{t.height} runs · " in text and f"launch {t.height}, skip 0" in text

    # every (block, size) row shows N, the D range, FLOPs and GPU-h, checked against the plan
    header = next(line for line in text.splitlines() if line.startswith("block"))
    assert header.split()[:8] == ["block", "size", "runs", "N", "D", "FLOPs", "GPU-h", "GiB"]
    rows = [line.split() for line in text.splitlines()
            if re.match(r"^\s*(\S+\s+)?(70M|150M|300M|600M|1\.4B)\s+\d", line)]
    groups = t.group_by("block", "N", maintain_order=True).agg(
        pl.len(), pl.col("D_total").min().alias("lo"), pl.col("D_total").max().alias("hi"),
        pl.col("flops").sum(), pl.col("gpu_hours").sum())
    assert len(rows) == groups.height == 17  # tuned, data, ensemble x 5 sizes + 2 students
    block = None
    for cells, g in zip(rows, groups.iter_rows(named=True)):
        if cells[0] not in ("70M", "150M", "300M", "600M", "1.4B"):
            block, cells = cells[0], cells[1:]
        assert block == g["block"]
        _size, runs, n, d, flops, hours = cells[:6]
        assert int(runs) == g["len"]
        assert number(n) == pytest.approx(g["N"], rel=5e-3)
        lo, _, hi = d.partition("..")
        assert number(lo) == pytest.approx(g["lo"], rel=5e-3)
        assert number(hi or lo) == pytest.approx(g["hi"], rel=5e-3)
        assert number(flops) == pytest.approx(g["flops"], rel=5e-2)
        assert number(hours) == pytest.approx(g["gpu_hours"], rel=5e-2, abs=0.5)
    # the total row's D is the sum of every run's D (issue 34: not a range, not a maximum)
    total = next(line.split() for line in text.splitlines() if line.startswith("total"))
    assert total[2] == "Σ" and number(total[3]) == pytest.approx(t["D_total"].sum(), rel=5e-3)
    assert t["N"].n_unique() == 5  # Kim's four sizes and the fifth (70M)


def test_view_without_blocks_lists_the_varying_axes(tmp_path, capsys, plain):
    assert cli("sweep", str(SWEEPS / "tiny.yaml"), "--dry-run", "--root", str(tmp_path)) == 0
    out = capsys.readouterr().out
    header = next(line for line in out.splitlines() if line.startswith("size"))
    assert header.split() == ["size", "runs", "N", "D", "FLOPs", "GiB", "U", "epochs", "wd", "lr"]
    assert "GPU-h" not in header  # no throughput in the spec: no column of dashes
    assert re.search(r"^cpu-50k +6 +51\.9K +32\.8K\.\.262K .* ×2 +×3 +×3 +0\.012$", out, re.MULTILINE)
    assert re.search(r"^  epochs +1 2 4 *$", out, re.MULTILINE)
    assert re.search(r"^  wd +0\.1 0\.2 0\.4 *$", out, re.MULTILINE)
    assert re.search(r"^total +12 ", out, re.MULTILINE)


def test_runs_prints_every_run(tmp_path, capsys, plain):
    plan = load_plan(SWEEPS / "tiny.yaml")
    assert cli("sweep", str(SWEEPS / "tiny.yaml"), "--dry-run", "--runs", "--root", str(tmp_path)) == 0
    out = capsys.readouterr().out
    assert all(rid in out and name in out for rid, name in plan.table.select("run_id", "name").rows())
    assert "…" not in out and "more runs" not in out  # at its natural width, never crushed
    assert max(map(len, out.splitlines())) > 100


def test_json_round_trips_to_the_plan_table(tmp_path, capsys, plain, plan_200m):
    assert cli("sweep", str(SPEC_200M), "--dry-run", "--format", "json", "--root", str(tmp_path)) == 0
    out = capsys.readouterr().out
    # the json-only columns a block does not set are null for its runs: read every row
    assert_frame_equal(pl.read_json(io.StringIO(out), infer_schema_length=None), plan_200m.table)
    assert_frame_equal(pl.DataFrame(json.loads(out), infer_schema_length=None), plan_200m.table)


def test_csv_and_parquet(tmp_path, capsys, plain):
    spec = str(SWEEPS / "tiny.yaml")
    table = load_plan(spec).table
    assert cli("sweep", spec, "--dry-run", "--format", "csv", "--root", str(tmp_path)) == 0
    out = capsys.readouterr().out
    assert out.splitlines()[0] == ",".join(table.columns)
    assert_frame_equal(pl.read_csv(io.StringIO(out), schema=table.schema), table)
    for name, read in (("plan.parquet", pl.read_parquet), ("plan.csv", None)):
        target = tmp_path / name  # the format from the suffix
        assert cli("sweep", spec, "--dry-run", "-o", str(target), "--root", str(tmp_path)) == 0
        assert f"wrote {target}: 12 runs" in capsys.readouterr().out
        got = read(target) if read else pl.read_csv(target, schema=table.schema)
        assert_frame_equal(got, table)
    target = tmp_path / "plan.out"
    assert cli("sweep", spec, "--dry-run", "--format", "parquet", "--output", str(target),
               "--root", str(tmp_path)) == 0
    assert_frame_equal(pl.read_parquet(target), table)
    assert not (tmp_path / "tiny").exists()  # a dry run changes nothing


@pytest.mark.parametrize("args, message", [
    (["--dry-run", "--format", "parquet"],
     "--format parquet is binary: write it to a file with -o FILE"),
    (["--dry-run", "--format", "jsn"],
     "--format jsn: expected one of table, csv, json, parquet (did you mean 'json'?)"),
    (["--format", "csv"], "--runs, --format and --output show the plan: add --dry-run"),
    (["--runs"], "--runs, --format and --output show the plan: add --dry-run"),
    (["--dry-run", "-o", "/nonexistent/dir/plan.csv"], "no such directory /nonexistent/dir"),
])
def test_bad_plan_output_is_one_line(tmp_path, capsys, args, message):
    assert cli("sweep", str(SWEEPS / "tiny.yaml"), *args, "--root", str(tmp_path)) == 2
    captured = capsys.readouterr()
    assert message in captured.err and captured.err.count("\n") == 1
    assert "Traceback" not in captured.err and captured.out == ""
    assert not (tmp_path / "tiny").exists()
