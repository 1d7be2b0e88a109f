"""``scalelab transfer SWEEP --hp optim.lr [--x N,D] [--holdout-largest K] [--predict N=1e9]``: a
hyperparameter-transfer law fitted to the sweep's own runs (``analysis.transfer``,
docs/transfer.md).

Reads ``<sweep>/runs.parquet`` (collected first when missing or stale:
``scalelab.cli.runs_table``) and every run's ``norms.parquet``
(``analysis.tables.records_scan``). Prints, on stdout:

- the per-group table: each size's optimal hp from a local quadratic in ln hp with its
  interval, or why the group was refused (its optimum at the grid's edge, no valley); with
  ``--best-over KEY`` each cell's loss is first profiled over KEY
  (``analysis.transfer.profile``: a batch-size law with the lr tuned per batch);
- the law hp* = c · Π x^a with its parameters' intervals;
- with ``--predict N=1e9`` (repeatable; one VAR=VALUE per variable of ``--x``, which is any
  set of N, D, U and C: ``N=..,D=..`` for a law in N and D, ``D=..`` for one in D alone): hp* at that point from the law
  above, with its prediction interval, and whether the point lies inside the fitted groups' range or is an extrapolation
  (by how many times the largest, or below the smallest, fitted value);
- with ``--holdout-largest K``: the law refitted without the K largest sizes, their
  predicted optimum with its prediction interval against the observed one;
- the norm check: the output layer's norm at each size's optimum, whether it is constant
  across sizes, and (held out) hp* predicted from the norm alone;
- a derive rule to paste into a spec (parsed by the spec's own rule parser first);
- the figure's path (``<sweep>/fit/transfer-<hp>.png`` unless ``--out``): the printed law
  (fitted to every accepted group), the held-out refit only as a dashed secondary line,
  the --predict points as diamonds.

SWEEP may be a table of runs from any trainer instead (a .csv, .parquet or .pq file with
columns N, D, loss and the hp: ``scalelab.cli.runs_table.read_runs_file``); it has no
norms.parquet records, so the norm check is skipped, and the figure goes beside it
(``<table stem>_fit/transfer-<hp>.png``).

Bad input (an unknown --hp, --x, --where, too few groups; a --predict naming a variable the
law does not use, missing one, or giving a value that is not a positive finite number) is
one line and exit code 2.
"""

from __future__ import annotations

import math
from decimal import Decimal, InvalidOperation
from itertools import combinations
from pathlib import Path

import typer

from scalelab.cli.app import app
from scalelab.errors import UserError, did_you_mean
from scalelab.store.layout import FIT_FOLDER

X_NAMES = ("N", "D", "U", "C")
X_CHOICES = tuple(",".join(c) for r in range(1, 5) for c in combinations(X_NAMES, r))
"""analysis.transfer.transfer.X_CHOICES, spelled as --x takes them (any non-empty subset of
N, D, U, C; the CLI test keeps them equal: this module does not import analysis at
start-up)."""


@app.command("transfer")
def transfer_cmd(
    sweep: Path = typer.Argument(..., help="Sweep directory (or the spec file that made it), or a "
                                 "table of runs (.csv, .parquet: columns N, D, loss and the hp, e.g. "
                                 "lr; README 'Bring your own runs'); the figure then goes to "
                                 "<table stem>_fit/."),
    hp: str = typer.Option(..., "--hp", help="The swept hyperparameter: a numeric runs-table "
                           "column such as optim.lr, optim.weight_decay, train.batch_size."),
    x: str = typer.Option("N", "--x", help="The law's variables: any of N, D, U, C joined by "
                          "commas, e.g. N, N,D, D (a batch law in tokens alone) or C."),
    holdout_largest: int = typer.Option(
        0, "--holdout-largest", metavar="K", min=0,
        help="Refit without the K largest sizes and predict their optimum (0: off)."),
    where: list[str] = typer.Option(
        [], "--where", help="Keep the runs meeting a condition (repeatable, ANDed; as in "
        "`scalelab fit --where`), e.g. optim.weight_decay=0.1."),
    best_over: str | None = typer.Option(
        None, "--best-over", metavar="KEY",
        help="Profile the loss over another swept column first: each (size, hp) cell's loss "
        "is the bottom of a quadratic in log KEY over its runs (e.g. --hp train.batch_size "
        "--best-over optim.lr; docs/transfer.md)."),
    loss: str = typer.Option("final_loss", "--loss-column", help="final_loss or best_loss (a "
                             "table's loss column: default its loss, final_loss, val_loss or "
                             "val/loss)."),
    norm: str | None = typer.Option(
        None, "--norm", help="The output-layer norm of the norm check (default rms_to_inf)."),
    layer: str | None = typer.Option(
        None, "--layer", help="The output layer's name in norms.parquet (default lm_head, or "
        "tok_emb when tied)."),
    out: Path | None = typer.Option(None, "--out", help="Figure path stem (default "
                                    "<sweep>/fit/transfer-<hp>, or <table stem>_fit/transfer-<hp> "
                                    "beside a table)."),
    predict: list[str] = typer.Option(
        [], "--predict", metavar="VAR=VALUE[,VAR=VALUE]",
        help="Print hp* with its 95% prediction interval at a point, from the printed law "
        "(repeatable): N=1e9 for a law in N, N=1e9,D=2e10 for N,D, C=1e21 for C; says when "
        "it extrapolates beyond the fitted sizes. Marked in the figure."),
    root: Path | None = typer.Option(None, "--root", help="Sweeps root, when SWEEP is a spec file."),
) -> int:
    """Fit hp* = c * x^a to each size's optimal hp, check it on held-out sizes and against
    the logged output-layer norms, and print a derive rule for a spec."""
    xs = parse_x(x)
    points = [parse_point(text, xs) for text in predict]
    if out is not None and out.name in ("", ".", ".."):
        raise UserError(f"expected a path stem with a file name (e.g. fits/transfer-lr), got "
                        f"'{out}'", key="--out")
    from analysis.errors import AnalysisInputError
    from analysis.tables.select import select_runs
    from scalelab.cli.runs_table import (
        TABLE_LOSS,
        is_runs_file,
        read_runs_file,
        read_runs_table,
        runs_file_folder,
    )
    from scalelab.store.layout import RUNS_FILE
    from scalelab.sweep.run.launch import sweep_dir_of

    if is_runs_file(sweep):  # a table of runs from any trainer: no records, outputs beside it
        sweep_dir, runs, loss, runs_path = None, read_runs_file(sweep, loss), TABLE_LOSS, str(sweep)
        folder = runs_file_folder(sweep, FIT_FOLDER)
    else:
        sweep_dir = sweep_dir_of(sweep, root)
        runs = read_runs_table(sweep_dir)
        runs_path, folder = str(sweep_dir / RUNS_FILE), sweep_dir / FIT_FOLDER
    numeric = [c for c, t in runs.schema.items() if t.is_numeric()]
    for flag, column in (("--hp", hp), ("--best-over", best_over)):
        if column is None or (column in runs.columns and runs.schema[column].is_numeric()):
            continue
        what = "is not numeric" if column in runs.columns else "no such column"
        raise UserError(f"{what}{did_you_mean(column, numeric)}; swept numeric columns include "
                        f"{', '.join(c for c in numeric if '.' in c) or 'none'}",
                        file=runs_path, key=f"{flag} {column}")
    try:
        runs = select_runs(runs, where)
        _report(sweep_dir, runs, xs, hp, holdout_largest, loss, norm, layer,
                out if out is not None else folder / f"transfer-{hp}", best_over,
                label=sweep if sweep_dir is None else sweep_dir, points=points)
    except AnalysisInputError as err:
        raise UserError(str(err), file=runs_path) from None
    return 0


def _report(sweep_dir: Path | None, runs, xs: tuple[str, ...], hp: str, k: int, loss: str,
            norm: str | None, layer: str | None, stem: Path, best_over: str | None, *,
            label: Path, points: list[dict[str, float]] = ()) -> None:
    """Print the transfer law of ``runs`` (module docstring) and save its figure at ``stem``;
    ``sweep_dir`` None: a table of runs, which has no norms records (no norm check)."""
    from analysis.plots.plots import save_figure
    from analysis.plots.transfer import plot_transfer
    from analysis.transfer.holdout import holdout_check
    from analysis.transfer.transfer import fit_transfer

    fit = fit_transfer(runs, xs, hp, loss=loss, best_over=best_over)
    echo = typer.echo
    if best_over:
        counts = (f"{fit.cells.height} cells, each one's loss profiled over {best_over} "
                  f"({fit.cells['over_tried'].sum()} values tried in all),")
    else:
        counts = f"{fit.cells['n'].sum()} runs"
    echo(f"{label}: optimal {hp} against {', '.join(xs)}, {counts} in {fit.table.height} groups")
    for note in fit.notes:
        echo(f"note: {note}")
    _group_table(fit)
    nz = fit.noise
    echo(f"loss noise: sd {nz.sigma2 ** 0.5:.3g} per run ({nz.source}, {nz.dof} dof), pooled "
         "over the accepted groups")
    _law_lines(fit, "law")
    predicted = [_predict_line(fit, at) for at in points]
    train, held = fit, []
    if k:
        train, held = holdout_check(runs, xs, hp, k, loss=loss, full=fit)  # fit's best_over
        _law_lines(train, f"law without the {k} largest")
        for h in held:
            _held_line(train, h)
    if sweep_dir is not None:
        _norm_section(sweep_dir, runs, fit, train, held, norm, layer)
    elif norm is not None or layer is not None:
        raise UserError("a table of runs has no norms.parquet records to check",
                        key="--norm" if norm is not None else "--layer")
    else:
        echo("norm check: skipped (a table of runs has no norms.parquet records)")
    _rule_lines(fit)
    stem.parent.mkdir(parents=True, exist_ok=True)
    figure = plot_transfer(fit, held, train if k else None, predicted)
    echo(f"figure: {save_figure(figure, stem)[0]}")


def parse_x(text: str) -> tuple[str, ...]:
    """``N,D`` -> ("N", "D"): a non-empty set of N, D, U, C (any order, each once), else a
    one-line ``UserError`` naming the bad name with a did-you-mean."""
    names = tuple(v.strip() for v in text.split(","))
    expected = f"expected N, D, U or C, or several joined by commas (e.g. N,D); got '{text}'"
    for v in names:
        if v not in X_NAMES:
            near = [n for n in X_NAMES if n.lower() == v.lower()]
            hint = f" (did you mean '{near[0]}'?)" if near else did_you_mean(v, X_NAMES)
            raise UserError(f"{expected}: '{v}' is not a variable{hint}", key="--x")
    if len(set(names)) < len(names):
        raise UserError(f"{expected}: a variable named twice", key="--x")
    return names


def parse_point(text: str, xs: tuple[str, ...]) -> dict[str, float]:
    """``N=1e9`` or ``N=1e9,D=2e10`` -> {variable: value}, one value per variable of the law
    ``xs``, each a finite number > 0; else a ``UserError`` naming what is wrong."""
    key = f"--predict {text}"
    takes = ",".join(f"{v}=VALUE" for v in xs)
    point: dict[str, float] = {}
    for part in text.split(","):
        name, eq, value = (s.strip() for s in part.partition("="))
        if not eq or not name:
            raise UserError(f"expected {takes} (the law's variables: {', '.join(xs)})", key=key)
        if name not in xs:
            near = [v for v in xs if v.lower() == name.lower()]
            hint = f" (did you mean '{near[0]}'?)" if near else did_you_mean(name, xs)
            other = "" if near or name not in X_NAMES else (
                "; pass --x N,D for a law in N and D" if name == "D" and xs == ("N",) else
                f"; pass --x {name} for a law in {name}")
            raise UserError(f"'{name}' is not a variable of the law in {', '.join(xs)}{hint}; "
                            f"expected {takes}{other}", key=key)
        if name in point:
            raise UserError(f"{name} given twice; expected {takes}", key=key)
        point[name] = _positive_number(value, name, key)
    if missing := [v for v in xs if v not in point]:
        raise UserError(f"missing {', '.join(missing)}: the law in {', '.join(xs)} needs "
                        f"{takes}", key=key)
    return {v: point[v] for v in xs}


def _positive_number(text: str, name: str, key: str) -> float:
    """``text`` as a float > 0 that a float can hold, else a ``UserError``."""
    try:
        exact = Decimal(text)
    except (InvalidOperation, ValueError):
        raise UserError(f"{name}: expected a number such as 1e9, got '{text}'", key=key) from None
    if not exact.is_finite():
        raise UserError(f"{name}: expected a finite number, got '{text}'", key=key)
    if exact <= 0:
        raise UserError(f"{name}: expected a value > 0, got '{text}'", key=key)
    value = float(exact)
    if not math.isfinite(value) or value == 0.0:
        raise UserError(f"{name}: '{text}' is outside the float range (positive values from "
                        "about 5e-324 to 1.8e308)", key=key)
    return value


def _predict_line(fit, at: dict[str, float]) -> tuple[dict[str, float], float, float, float]:
    """Print hp* at ``at`` from ``fit``'s law with its prediction interval and where ``at``
    lies against the fitted groups; return (at, hp*, lo, hi) for the figure."""
    import numpy as np

    where = ", ".join(f"{v}={at[v]:.3g}" for v in fit.x)
    head = f"predicted {fit.hp}* at {where}"
    mu, _ = fit.law.predict_log(**at)
    with np.errstate(over="ignore", under="ignore"):
        hp, lo, hi = fit.predict(**at)
    span = _fitted_span(fit, at)
    if not (math.isfinite(hp) and hp > 0):
        typer.echo(f"{head}: outside the float range (ln {fit.hp}* = {mu:.4g}); {span}")
        return at, float("nan"), float("nan"), float("nan")
    pi = f"{100 * fit.law.level:g}% PI"
    band = (f"{pi} ({lo:.4g}, {hi:.4g})" if math.isfinite(lo) and math.isfinite(hi)
            else f"no interval ({fit.law.interval_note})")
    typer.echo(f"{head}: {hp:.4g}, {band}; {span}")
    return at, hp, lo, hi


def _fitted_span(fit, at: dict[str, float]) -> str:
    """``inside the fitted range (N 5,000 to 300,000)`` or ``extrapolation: N is 3,333x the
    largest fitted N (300,000)`` (each variable of the law on its own)."""
    ok, outside, inside = fit.accepted, [], []
    for v in fit.x:
        low, high, x = float(ok[v].min()), float(ok[v].max()), at[v]
        if x > high * (1 + 1e-9):
            outside.append(f"{v} is {_times(x, high)} the largest fitted {v} ({_num(high)})")
        elif x < low * (1 - 1e-9):
            outside.append(f"{v} is {_times(low, x)} below the smallest fitted {v} ({_num(low)})")
        else:
            inside.append(f"{v} {_num(low)} to {_num(high)}")
    if not outside:
        return f"inside the fitted range ({'; '.join(inside)})"
    rest = f"; {', '.join(v for v in fit.x if not any(o.startswith(f'{v} ') for o in outside))} inside" \
        if inside else ""
    return f"extrapolation: {'; '.join(outside)}{rest}"


def _times(big: float, small: float) -> str:
    """``3.33x``, ``3,333x``, ``5e+303x``: big / small (computed in logs: it may overflow)."""
    decades = math.log10(big) - math.log10(small)
    if decades >= 300:
        return f"10^{decades:.1f}x"
    ratio = 10 ** decades
    return f"{ratio:,.0f}x" if 100 <= ratio < 1e7 else f"{ratio:.3g}x"


def _num(value: float) -> str:
    return f"{value:,.0f}" if 1 <= value < 1e7 else f"{value:.3g}"


def _group_table(fit) -> None:
    from rich.table import Table
    from rich.text import Text

    from analysis.transfer.transfer import group_label
    from scalelab.cli.wide import print_wide

    pct = f"{100 * fit.law.level:g}% CI"
    table = Table(title=Text(f"per-group optimum of {fit.hp} (quadratic in log {fit.hp})"),
                  title_justify="left")
    for head in ("group", "cells", "runs", "best run", f"{fit.hp}*", pct, "loss*", "status"):
        table.add_column(Text(head), justify="left" if head in ("group", "status") else "right")
    for r in fit.table.iter_rows(named=True):
        ok = r["why"] is None
        table.add_row(Text(group_label(r, fit.x)), str(r["n_cells"]), str(r["n_runs"]),
                      f"{r['best_hp']:.4g}", f"{r['hp_opt']:.4g}" if ok else "-",
                      f"({r['hp_lo']:.3g}, {r['hp_hi']:.3g})" if ok else "-",
                      f"{r['loss_opt']:.4f}" if ok else "-",
                      Text(("ok" if r.get("flag") is None else "ok, wider SE (below)") if ok
                           else "refused (below)"))
    print_wide(table)
    for r in fit.table.filter(fit.table["why"].is_not_null()).iter_rows(named=True):
        typer.echo(f"  {group_label(r, fit.x)} refused: {r['why']}")
    for r in fit.table.filter(fit.table["flag"].is_not_null()).iter_rows(named=True):
        typer.echo(f"  {group_label(r, fit.x)}: {r['flag']}")


def _law_lines(fit, title: str) -> None:
    law = fit.law
    terms = " * ".join(f"{v}^a_{v}" for v in fit.x)
    tau = (f"extra scatter sd {law.tau2 ** 0.5:.3g} in ln {fit.hp} added to every group's SE "
           "(Paule-Mandel)" if law.tau2 > 0 else "the SEs explain the scatter")
    typer.echo(f"{title}: {fit.hp}* = c * {terms}, weighted least squares over {law.n} groups "
               f"(reduced chi2 {law.chi2_red:.3g}: {tau}; largest weight share "
               f"{law.max_weight:.2f})")
    pct = f"{100 * law.level:g}%"
    for name, est, lo, hi in law.params():
        ci = f", {pct} CI ({lo:.4g}, {hi:.4g})" if lo == lo else f" ({law.interval_note})"
        typer.echo(f"  {name} = {est:.4g}{ci}")


def _held_line(fit, h) -> None:
    pi = f"{100 * fit.law.level:g}% PI"
    head = f"held out {h.label()}: predicted {fit.hp}* {h.predicted:.4g}, {pi} ({h.lo:.4g}, {h.hi:.4g})"
    if h.why is not None:
        typer.echo(f"{head}; observed: refused ({h.why})")
        return
    if not (h.lo == h.lo and h.hi == h.hi):  # no interval: the refit has too few groups
        verdict = f"no interval to cover it ({fit.law.interval_note})"
    else:
        verdict = "covered" if h.covered else "NOT covered"
    typer.echo(f"{head}; observed {h.observed:.4g} ({h.obs_lo:.4g}, {h.obs_hi:.4g}); error "
               f"{h.err_log:+.3f} in log units, ratio observed/predicted {h.ratio:.3f}: {verdict}")


def _norm_section(sweep_dir: Path, runs, fit, train, held, norm, layer) -> None:
    import polars as pl

    from analysis.errors import AnalysisInputError
    from analysis.tables.records_scan import scan_records
    from analysis.transfer.norms import DEFAULT_NORM, cell_log_norms, norm_check, output_norms
    from analysis.transfer.transfer import group_label

    explicit = norm is not None or layer is not None
    ids = runs["run_id"].cast(pl.String).to_list() if "run_id" in runs.columns else []
    records = scan_records(sweep_dir, "norms").filter(pl.col("run_id").is_in(ids)).collect()
    if records.height == 0:
        typer.echo("norm check: no norms.parquet records for these runs (train with "
                   "train.norms_every > 0)")
        return
    try:
        run_norms, used = output_norms(records, norm or DEFAULT_NORM, layer)
        check = norm_check(train, run_norms, norm=norm or DEFAULT_NORM, layer=used)
    except AnalysisInputError as err:
        if explicit:
            raise
        typer.echo(f"norm check: skipped ({err})")
        return
    typer.echo(f"norm check: {check.norm} of {check.layer} (weights, last step) at each size's "
               "optimum (interpolated in log hp; the nearest run in brackets)")
    for r in check.table.iter_rows(named=True):
        typer.echo(f"  {group_label(r, fit.x)}: {r['norm_opt']:.4g} (nearest run {r['nearest_run']}: "
                   f"{fit.hp} {r['nearest_hp']:.4g}, norm {r['nearest_norm']:.4g})")
    if check.constant is None:
        typer.echo(f"  constancy: not tested ({check.n} groups; the slope's interval needs >= "
                   f"{len(fit.x) + 3})")
    else:
        slopes = "; ".join(f"slope in log {v} {b:+.3f}, {100 * check.level:g}% CI ({lo:+.3f}, {hi:+.3f})"
                           for v, b, lo, hi in check.slopes)
        verdict = "constant across sizes (every CI holds 0)" if check.constant else "NOT constant"
        typer.echo(f"  log norm* against log x: {slopes}: {verdict}; scatter {check.log_sd:.3f} in "
                   f"log units about the common value {math.exp(check.log_mean):.4g}")
    if not held:
        return
    cells = cell_log_norms(fit.cells, run_norms)
    for h in held:
        g = cells.filter(pl.all_horizontal([pl.col(v) == h.x[v] for v in fit.x]))
        value, lo, hi, why = check.predict_hp(g, fit.hp)
        label = "" if check.constant else " (the norm is not constant: for comparison only)"
        if why:
            typer.echo(f"  held out {h.label()}: no prediction from the norm ({why})")
            continue
        obs = f"observed {h.observed:.4g}" if h.why is None else "observed: refused"
        err = (f"; error {math.log(h.observed / value):+.3f} log units"
               if h.why is None else "")
        band = (f"({lo:.4g}, {hi:.4g})" if lo == lo else
                "(no interval: the norm's band leaves this size's grid or is not monotone in it)")
        typer.echo(f"  held out {h.label()}: {fit.hp}* from the norm {value:.4g} {band}, "
                   f"from the law {h.predicted:.4g}; {obs}{err}{label}")


def _rule_lines(fit) -> None:
    from analysis.transfer.rule import approximations, derive_rule
    from scalelab.sweep.spec import keys
    from scalelab.sweep.spec.rules import parse_rule

    text = derive_rule(fit.law)
    numeric = [k for k in keys.leaf_keys() if keys.is_numeric(k)]
    target = fit.hp if fit.hp in numeric else None
    parse_rule(target or "optim.lr", text, numeric)  # the spec loader's own parser
    typer.echo("derive rule (paste under derive: in a spec):")
    typer.echo(f'  {fit.hp}: "{text}"')
    if target is None:
        typer.echo(f"  note: {fit.hp} is not a config key a spec can derive")
    for a in approximations(fit.law):
        typer.echo(f"  note: writes {a}")
