"""``scalelab explain A B``: the fields that make two runs' ids differ (``scalelab.identity``)."""

from __future__ import annotations

from pathlib import Path

import typer

from scalelab.cli.app import app


@app.command("explain")
def explain_cmd(
    a: Path = typer.Argument(..., help="Run directory or config YAML."),
    b: Path = typer.Argument(..., help="Run directory or config YAML."),
) -> int:
    """Name the identity fields that differ between two runs (and the operational ones)."""
    from scalelab.sweep.view.explain import explain

    for line in explain(a, b).lines():
        typer.echo(line)
    return 0
