"""``scalelab demo [--root DIR] [--full]``: the embedded demo, end to end on a laptop.

Runs ``sweeps/demo.yaml`` (a few-minute subset of the CPU twin of Kim et al.'s study;
``--full``: all of ``sweeps/tiny_infinite_compute.yaml``) on the local backend, evaluates
the ensembles, collects the runs, fits the recipes (``analysis.recipes.infinite_compute``) and
prints the fitted laws, the asymptotes with their CIs, the data-efficiency multipliers
and the path of the report and its figure. Idempotent: a second call reuses finished runs.
"""

from __future__ import annotations

import math
import time
from pathlib import Path

import typer

from scalelab.cli.app import app
from scalelab.errors import EXIT_FAILURE, EXIT_OK, UserError

DEMO_SPEC = "demo.yaml"
FULL_SPEC = "tiny_infinite_compute.yaml"


def sweeps_dir() -> Path:
    """The repository's ``sweeps/`` (the demo runs from a clone)."""
    import scalelab

    path = Path(scalelab.__file__).resolve().parent.parent / "sweeps"
    if not path.is_dir():
        raise UserError(f"no sweeps/ directory beside the scalelab package ({path}); run the demo from a clone")
    return path


def run_demo(spec_path: Path, root: Path, *, executor: str | None = None, echo=print) -> tuple[int, Path | None]:
    """Sweep -> ensembles -> collect -> recipes report. Returns (exit code, report path)."""
    from analysis.report.infinite_compute_md import write_infinite_compute_report
    from scalelab.ensemble.evaluate import evaluate_sweep, find_groups
    from scalelab.sweep.run.launch import sweep_dir_for
    from scalelab.sweep.run.start import plan_sweep, start_sweep
    from scalelab.sweep.spec.load import load_spec
    from scalelab.sweep.view.collect import collect

    t0 = time.perf_counter()
    spec = load_spec(spec_path)
    # Each run process gets launcher.cpus_per_task threads (the local backend's thread_env).
    plan = plan_sweep(spec)
    sweep_dir = sweep_dir_for(spec.name, root=root, launcher_root=None)
    sweep = start_sweep(spec, sweep_dir)
    steps = int(plan.table["steps"].sum())
    tokens = int(plan.table["D_total"].sum()) if "D_total" in plan.table.columns else 0
    echo(f"[demo] {spec_path.name}: {len(plan)} runs, {steps:,} training steps, "
         f"{tokens / 1e6:,.1f}M training tokens -> {sweep_dir}")
    report = sweep.launch(plan, wait=True, executor=executor)  # staged when it has students
    failed = sorted(r for r, s in report.results.items() if s not in ("COMPLETED",))
    took = time.perf_counter() - t0
    rate = f", {tokens / took / 1e3:,.0f}k tokens/s over all runs" if tokens and not report.skipped else ""
    echo(f"[demo] trained {len(report.handles)} runs, reused {report.skipped} ({took:.0f}s{rate})")
    if failed:
        echo(f"[demo] {len(failed)} run(s) did not complete: {', '.join(failed)}; see `scalelab status {sweep_dir}`")
        return EXIT_FAILURE, None
    if find_groups(sweep_dir):
        evaluate_sweep(sweep_dir, methods=("logits", "probs"))
    collect(sweep_dir)
    path, res = write_infinite_compute_report(sweep_dir)
    echo(f"[demo] done in {time.perf_counter() - t0:.0f}s\n")
    _summary(res, path, echo)
    return EXIT_OK, path


def _num(v: float) -> str:
    return "inf" if math.isinf(v) else ("n/a" if math.isnan(v) else f"{v:.4f}")


def _why_not(fit) -> str | None:
    """Why the fit's asymptote may not be printed as a number (None: it may): the analysis'
    own rule, ``infinite_compute.reportable`` (enough points, a finite interval, identified)."""
    from analysis.recipes.infinite_compute import reportable

    return reportable(fit)


def _law(fit) -> str:
    """The fitted law, with why its asymptote is not given; no parameters from fewer points
    than the law needs (``identified.min_sizes``): they would be numbers, not results."""
    if fit is None:
        return "not fitted"
    from analysis.fit.identified import min_sizes_e

    why = _why_not(fit)
    if fit.x.size < min_sizes_e(fit.n_free):
        return f"not fitted: {why}"
    return f"{fit}  (R^2 {fit.r2:.3f}, {fit.x.size} points)" + (f"  [{why}]" if why else "")


def _asym(fit) -> str:
    """C with its 95% CI, or why it is not given (never a number for an unidentified law)."""
    if why := _why_not(fit):
        return f"not identified: {why.removeprefix('not identified: ')}"
    from analysis.recipes.infinite_compute import flag_of

    lo, hi = fit.ci()
    flag = f"  [{f}]" if (f := flag_of(fit)) else ""
    return f"{fit.E:.4f}  95% CI ({lo:.4f}, {hi:.4f}), width {hi - lo:.4f}{flag}"


def _mult(row: dict) -> str:
    m, why = row["data_multiplier"], row.get("why")
    if why or m is None or math.isnan(m):
        return f"not given: {why or 'no data-scaling fit'}"
    ci = ""
    if row["lo"] is not None and not math.isnan(row["lo"]):
        ci = f"  (95% CI {_x(row['lo'])} .. {_x(row['hi'])})"
    if math.isinf(m):
        return "inf (below the reference recipe's fitted asymptote in U)" + ci
    return f"x{m:.2f}{ci}"


def _x(v: float) -> str:
    return "inf" if math.isinf(v) else f"x{v:.2f}"


def _monotone(sub) -> str:
    """Whether the best loss falls with every step in N; else each rise, by how much, against
    the best loss at any smaller N (so a reader can weigh it against the seed scatter)."""
    ns, losses = sub["N"].to_list(), sub["loss"].to_list()
    rises = [f"+{v - min(losses[:i]):.4f} at {int(n):,}" for i, (n, v) in enumerate(zip(ns, losses))
             if i and v >= min(losses[:i])]
    return "falls monotonically in N" if not rises else \
        "does NOT fall monotonically in N: " + ", ".join(rises) + " above the best at a smaller N"


def _summary(res, path: Path, echo) -> None:
    import polars as pl

    from analysis.recipes.infinite_compute import ensemble_beats_members

    echo("Best loss per model size (final held-out loss, nats/token):")
    best = res.best_per_n.filter(~pl.col("recipe").str.starts_with("ensemble"))
    for (recipe,), sub in best.group_by("recipe", maintain_order=True):
        cells = ", ".join(f"{int(n):,}: {v:.4f}" for n, v in zip(sub["N"], sub["loss"]))
        echo(f"  {recipe:<12} {cells}  ({_monotone(sub.sort('N'))})")
    echo("\nFitted laws (L = A/x^B + C, x in millions of parameters / tokens, or K; Kim et al. 2025):")
    laws = {f"{k} vs N": v for k, v in res.fits.items()}
    laws.update({f"ensemble of N={n:,} vs K": f for n, f in res.k_fits.items()})
    laws[f"{res.reference} recipe vs unique tokens U"] = res.data_fit
    for name, fit in laws.items():
        echo(f"  {name:<36} {_law(fit)}")
    echo("\nAsymptotes (95% CI from the fit's covariance; none for a law that is not identified):")
    for name, fit in laws.items():
        echo(f"  {name:<36} {_asym(fit)}")
    from analysis.recipes.names import JOINT, REGULARIZED

    joint, reg = res.fits.get(JOINT), res.fits.get(REGULARIZED)
    if joint is not None and reg is not None and not _why_not(joint) and not _why_not(reg):
        gap = reg.E - joint.E
        (jlo, jhi), (rlo, _) = joint.ci(), reg.ci()
        beyond = "more" if gap > (jhi - jlo) / 2 else "LESS"
        sep = "the two CIs do not overlap" if jhi < rlo else "the two CIs overlap"
        echo(f"  joint (N,K->inf) vs regularized: {gap:+.4f} nats lower, {beyond} than the joint CI's "
             f"half-width {(jhi - jlo) / 2:.4f}; {sep}")
    from analysis.recipes.verdicts import RULE, verdict_lines

    echo(f"\nWhich recipe is better at infinite compute ({RULE}):")
    for line in verdict_lines(res):
        echo(f"  {line}")
    if res.ensemble.height:
        echo("\nEnsembles (logit averaging) against each of their members:")
        for line in ensemble_beats_members(res):
            echo(f"  {line}")
    if res.students.height:
        from analysis.recipes.distill_share import share_lines

        echo("\nDistilled students (share of the ensembling gain kept: (single - student) / (single - ensemble)):")
        for line in share_lines(res):
            echo(f"  {line}")
    echo(f"\nData efficiency vs the {res.reference} recipe "
         f"(1x = {res.ref_loss:.4f} at U = {res.U0:,.0f}; 95% CI: residual bootstrap):")
    if res.data_law is not None:
        bound = ("; without a floor each multiplier is a lower bound" if not res.data_law.floor else "")
        echo(f"  data law {res.data_law.why}{bound}")
    rows = list(res.multipliers.iter_rows(named=True))
    whys = {row.get("why") for row in rows}
    if len(rows) > 1 and len(whys) == 1 and None not in whys:  # one reason for all: say it once
        echo(f"  no multiplier for any recipe: {whys.pop()}")
        rows = []
    for row in rows:
        echo(f"  {row['recipe']:<40} loss {_num(row['loss'])}  {_mult(row)}")
    if res.budgets.height:
        from analysis.recipes.budgets import budget_lines

        echo(f"\nAt each budget U (asymptote vs N at that U; multiplier vs the {res.reference} recipe's best there):")
        for line in budget_lines(res.budgets, res.reference):
            echo(f"  {line}")
    from analysis.report.holdout_lines import holdout_lines

    echo("\nExtrapolation check (each law refitted without its largest size(s); 95% prediction "
         "intervals, docs/extrapolation.md):")
    for line in holdout_lines(res) or ["no identified law to check"]:
        echo(f"  {line}")
    echo(f"\nReport: {path}\nFigure: {path.parent / 'recipes.png'}")


@app.command("demo")
def demo_cmd(
    root: Path = typer.Option(Path("runs"), "--root", help="Where the demo's sweep directory goes."),
    full: bool = typer.Option(False, "--full", help="Run the whole CPU twin (< 60 min on 2 cores)."),
    spec: Path | None = typer.Option(None, "--spec", hidden=True, help="Another sweep spec (tests)."),
    executor: str | None = typer.Option(None, "--executor", hidden=True, help="Override the spec's executor."),
) -> int:
    """Train a small infinite-compute study on this machine, fit it and write the report."""
    spec_path = spec or sweeps_dir() / (FULL_SPEC if full else DEMO_SPEC)
    code, _ = run_demo(spec_path, root, executor=executor, echo=typer.echo)
    return code
