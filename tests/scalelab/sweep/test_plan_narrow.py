"""The dry-run view of sweeps/200M_tokens.yaml names every size and block in full: piped to
a file (rich's 80 columns there), on an 80-column terminal (every column fits, blocks on
lines of their own) and on a narrower one (numbers give way, names never)."""

from __future__ import annotations

import io
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
from rich.console import Console

from scalelab.sweep.plan.expand import load_plan
from scalelab.sweep.view.render import render_overview

REPO = Path(__file__).resolve().parents[3]
SPEC_200M = REPO / "sweeps" / "200M_tokens.yaml"


@pytest.fixture(scope="module")
def plan_200m():
    return load_plan(SPEC_200M)


def _names(plan) -> list[str]:
    """The block names and the size (preset) names of the plan."""
    presets = {c.model.preset for c in plan.configs}
    return sorted(set(plan.table["block"].to_list()) | presets)


def _assert_whole(text: str, names: list[str]) -> None:
    for name in names:
        assert re.search(rf"(?<!\S){re.escape(name)}(?!\S)", text), f"{name!r} cut or missing:\n{text}"


def _terminal(plan, width: int) -> str:
    console = Console(file=io.StringIO(), width=width, force_terminal=True, color_system=None,
                      highlight=False, soft_wrap=True)
    console.print(render_overview(plan))
    return console.file.getvalue()


def test_piped_dry_run_keeps_every_name_and_column_whole(tmp_path, plan_200m):
    env = {k: v for k, v in os.environ.items() if k not in ("COLUMNS", "FORCE_COLOR", "TTY_COMPATIBLE")}
    log = tmp_path / "plan.log"
    with log.open("w") as out:
        subprocess.run([sys.executable, "-m", "scalelab", "sweep", str(SPEC_200M), "--dry-run",
                        "--root", str(tmp_path / "runs")], stdout=out, env=env, check=True,
                       cwd=REPO, timeout=300)
    text = log.read_text()
    _assert_whole(text, _names(plan_200m))
    assert "…" not in text, text
    assert "distill-ensemble  300M      1   300M" in text  # the wide table, one row per size


def test_an_80_column_terminal_fits_the_table_with_every_name(plan_200m):
    text = _terminal(plan_200m, 80)
    _assert_whole(text, _names(plan_200m))
    assert "…" not in text, text
    table = text.split("×k:")[0].splitlines()
    assert max(len(line.rstrip()) for line in table) <= 80
    # each block on a line of its own, above its sizes
    assert re.search(r"^tuned\n70M +336 ", text, re.M), text


def test_a_narrower_terminal_cuts_numbers_never_names(plan_200m):
    text = _terminal(plan_200m, 50)
    _assert_whole(text, _names(plan_200m))
