"""``scalelab ensemble SWEEP``: held-out loss of K-member ensembles, K = 1..M (scalelab.ensemble)."""

from __future__ import annotations

from pathlib import Path

import typer

from scalelab.cli.app import app
from scalelab.errors import UserError


def sweep_dir_of(sweep: str, root: str | None = None) -> Path:
    """A sweep directory, or the directory of a sweep spec (``<root>/<spec.name>``)."""
    path = Path(sweep)
    if path.is_dir():
        return path
    if path.suffix in (".yaml", ".yml") and path.is_file():
        import os

        from scalelab.store.layout import DEFAULT_ROOT
        from scalelab.sweep.spec.load import load_spec

        spec = load_spec(path)
        base = root or os.environ.get("SCALELAB_ROOT") or getattr(spec.launcher, "root", None) or DEFAULT_ROOT
        return Path(base) / spec.name
    raise UserError("neither a sweep directory nor a sweep spec (.yaml)", file=sweep)


@app.command("ensemble")
def ensemble_cmd(
    sweep: str = typer.Argument(..., help="Sweep directory (or its spec YAML)."),
    method: list[str] = typer.Option(["logits"], "--method", help="'logits' (Kim et al.) and/or 'probs'; repeatable."),
    batches: int = typer.Option(None, min=1, help=(
        "Held-out batches (default: the runs' train.eval_batches); at most the validation "
        "split's windows W (batch k + W repeats batch k).")),
    batch_size: int = typer.Option(None, min=1, help=(
        "Sequences per held-out batch (default: train.batch_size, as the runs' own evals); at "
        "most the validation split's windows (or train.batch_size, when larger).")),
    device: str = typer.Option("auto", help=(
        "'auto' (cuda when present), 'cpu', 'cuda' or 'cuda:N' (train.device's rule).")),
    root: str = typer.Option(None, help="Root of sweep directories when SWEEP is a spec."),
) -> None:
    """Evaluate every group of members (runs differing only in `member`) as K = 1..M
    ensembles; rows go to SWEEP/ensembles/evals.parquet."""
    from rich.console import Console
    from rich.table import Table

    from scalelab.cli.wide import print_wide
    from scalelab.config import device_problem
    from scalelab.ensemble.combine import METHODS
    from scalelab.ensemble.evaluate import SHORT_HEX, evaluate_sweep, find_groups, set_aside_damaged
    from scalelab.errors import did_you_mean

    for m in method:
        if m not in METHODS:
            raise UserError(f"{m!r} is not one of {', '.join(METHODS)}{did_you_mean(m, METHODS)}", key="--method")
    if problem := device_problem(device):
        raise UserError(problem, key="--device")
    sweep_dir = sweep_dir_of(sweep, root)
    if not find_groups(sweep_dir):
        raise UserError("no group of >= 2 COMPLETED runs differing only in `member`", file=str(sweep_dir))
    if note := set_aside_damaged(sweep_dir):  # the hint of every reader of a damaged file
        typer.echo(f"note: {note}", err=True)
    table, out = evaluate_sweep(sweep_dir, methods=tuple(method), n_batches=batches, batch_size=batch_size,
                                device=device, device_key="--device")
    console = Console()
    for gid, rows in table.group_by("run_id", maintain_order=True):
        t = Table(title=f"{rows['name'][0]} ({gid[0][:SHORT_HEX]})")
        t.add_column("K", justify="right")
        for m in method:
            t.add_column(f"loss ({m})", justify="right")
        for k in sorted(rows.filter(rows["method"] != "member")["members"].unique().to_list()):
            vals = [rows.filter((rows["method"] == m) & (rows["members"] == k))["loss"] for m in method]
            t.add_row(str(k), *[f"{v[0]:.4f}" if len(v) else "" for v in vals])
        single = rows.filter(rows["method"] == "member").sort("member")
        t.caption = "members alone: " + ", ".join(
            f"{r['member']}: {r['loss']:.4f}" for r in single.iter_rows(named=True))
        print_wide(t, console)
    console.print(f"wrote {out}")
