"""Every verb's ``--help`` reads as plain sentences: no reST markup (````code````,
``:func:``), no module paths (``scalelab.sweep.run...``), no sentence broken mid-line by a
hard-wrapped docstring. The verbs are read from the CLI itself, so a new one is checked
without anyone listing it."""

from __future__ import annotations

import re

import pytest
import typer
from typer.testing import CliRunner

from scalelab.cli import app

MARKUP = re.compile(r"``|:(func|class|mod|meth|attr):`|`[^`]+`_")
"""reST: double backticks, roles, named links."""
MODULE_PATH = re.compile(r"\b(scalelab|analysis|optim)\.[a-z_]+\.[a-z_]+")
"""A dotted path two levels into a package: an internal name, not the user's business."""


def _verbs() -> list[list[str]]:
    group = typer.main.get_group(app)
    out = [[]]
    for name, cmd in group.commands.items():
        out.append([name])
        for sub in getattr(cmd, "commands", {}):
            out.append([name, sub])
    return out


@pytest.mark.parametrize("argv", _verbs(), ids=lambda a: " ".join(a) or "scalelab")
def test_help_is_plain_text(argv):
    result = CliRunner().invoke(app, [*argv, "--help"], prog_name="scalelab",
                                env={"COLUMNS": "100", "TERM": "dumb", "NO_COLOR": "1"})
    assert result.exit_code == 0, result.output
    text = result.output
    assert not MARKUP.search(text), MARKUP.search(text).group(0)
    assert not MODULE_PATH.search(text), MODULE_PATH.search(text).group(0)
