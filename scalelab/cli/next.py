"""``scalelab next SWEEP``: the next runs of an adaptive study, as a spec to launch.

On any spec (blocks, zip groups, derived values, recipes named by ``extra.recipe``, Kim's
tuned blocks or ``--recipe``): the candidates are the whole spec's runs and more seeds of
its cells (``scalelab.adaptive.any_study``), planned by ``analysis.adaptive.recipe_design``;
a spec that is one tuned product grid keeps the coordinate walk described below
(``_grid_study`` says which). Targets there: ``NAME.E``, ``ranking`` (>= 5 settled sizes per
recipe, ``identified.MIN_SIZES``), ``multiplier``; default ``regularized.E``, else ranking.

SWEEP is the study's spec file or its sweep directory (``scalelab.adaptive.source``). The
candidate space is the study's grid (``scalelab.adaptive.study``: sizes, the tuned axes,
seeds as replicates); the finished runs come from ``<sweep>/runs.parquet`` (collected first
when missing or stale). ``analysis.adaptive.plan_next`` scores every candidate never
launched by the expected reduction of the CI width of the target per unit of cost and
chooses up to ``-n`` runs (docs/adaptive.md). They are printed with their expected gain and
cost and written as a spec with one ``adaptive`` block (``scalelab.adaptive.block``):
``scalelab sweep FILE`` launches exactly them. A run the sweep has launched, finished or
not, is never proposed.

Targets (``scalelab.adaptive.targets``): ``regularized.E`` (default), the asymptote E of the
tuned grid's best cell per size; ``NAME.E`` of another recipe; ``ranking``, the order of the
recipes by E; ``multiplier``, the data multiplier of E against the reference recipe's data
law. Recipes are slices of the grid: Kim's standard (weight decay 0.1) and regularized (the
whole grid) by default, or ``--recipe NAME=axis=v1|v2``.

The line printed is ``scalelab report``'s story (``analysis.adaptive.target_fits``): per size
the best cell by its mean over seeds, E and its interval by ``recipe_asymptote`` on the
settled sizes (on a complete grid, every size: the report's points), or "not identified"
with the report's reason and no number; the multiplier is the report's data law and
bootstrap interval (``analysis.adaptive.multiplier``).
"""

from __future__ import annotations

import math
from pathlib import Path

import typer

from scalelab.cli.app import app
from scalelab.cli.recipe_options import RECIPE_HELP, TARGET_HELP, recipe_filters
from scalelab.errors import UserError, did_you_mean

LOSSES = ("final_loss", "best_loss")


def study_target(study, target: str, recipes: list[str], runs):
    """The ``analysis.adaptive.targets`` target of ``--target``/``--recipe`` options."""
    from scalelab.adaptive.targets import build_target

    return build_target(study, target, filters=recipe_filters(recipes), runs=runs)


@app.command("next")
def next_cmd(
    sweep: Path = typer.Argument(..., help="Sweep directory, or the study's spec file."),
    budget: float | None = typer.Option(
        None, "--budget", help="GPU-hours the proposed runs may use together (default: no "
        "limit; needs launcher.flops_per_gpu_s in the spec)."),
    target: str | None = typer.Option(None, "--target", help=TARGET_HELP + " Default: "
                                      "regularized.E, else ranking (>= 2 recipes), else the "
                                      "one recipe's E."),
    recipe: list[str] = typer.Option([], "--recipe", help=RECIPE_HELP),
    n: int = typer.Option(4, "-n", min=1, help=(
        "Runs to propose: at most the candidates not yet run, each once (a larger N proposes them all).")),
    output: Path | None = typer.Option(
        None, "-o", "--output", help="Write the spec of the proposed runs here (default "
        "<sweep>/adaptive/next.yaml)."),
    root: Path | None = typer.Option(None, "--root",
                                     help="Sweeps root, when SWEEP is a spec file."),
    loss: str = typer.Option("final_loss", "--loss-column", help="final_loss or best_loss."),
) -> int:
    """Propose the runs that most shrink the target's CI per GPU-hour; write them as a
    spec block that `scalelab sweep` launches."""
    if loss not in LOSSES:
        raise UserError(f"expected one of {', '.join(LOSSES)}{did_you_mean(loss, LOSSES)}",
                        key="--loss-column")
    if budget is not None and not budget > 0:
        raise UserError(f"must be > 0 GPU-hours, got {budget}", key="--budget")
    from analysis.adaptive import plan_next
    from analysis.adaptive.target_fits import judge
    from scalelab.adaptive.block import block_spec
    from scalelab.adaptive.loop import check_budget
    from scalelab.adaptive.observed import observe
    from scalelab.adaptive.record import ADAPTIVE_DIR, NEXT_FILE, remember_study
    from scalelab.adaptive.source import resolve
    from scalelab.adaptive.targets import DEFAULT_TARGET, summary_text
    from scalelab.sweep.plan.datasets import dataset_facts

    source = resolve(sweep, root=root)
    filters = recipe_filters(recipe)
    datasets = dataset_facts(source.spec)
    study = _grid_study(source.spec, datasets, filters)
    if study is None:  # blocks, zip groups, recipes of any kind: the whole spec
        return _next_any(source, datasets, filters, target, budget, n, output, loss)
    if budget is not None:
        check_budget(study)
    runs = _runs(source.sweep_dir)
    goal = study_target(study, target or DEFAULT_TARGET, recipe, runs)
    obs = observe(study, runs, loss=loss)
    plan = plan_next(study.space, obs.done, obs.pending.select(study.columns), batch=n,
                     budget_left=math.inf if budget is None else budget, target=goal)
    summary, fits = judge(goal, obs.done)
    waiting = obs.launched.height - obs.done.height
    typer.echo(f"{source.sweep_dir}: {summary_text(summary, fits)}; {obs.done.height} of "
               f"{study.candidates.height} candidate runs finished, {waiting} launched without "
               f"a loss (yet), {obs.spent:.4g} {study.unit} spent")
    if plan.chosen.height == 0:
        typer.echo(f"nothing to propose: {_why_none(study, obs, budget)}")
        return 0
    ids = study.run_ids(plan.chosen["key"].to_list())
    if done := set(ids) & set(obs.launched["run_id"].to_list()):  # observed.py rules it out
        raise RuntimeError(f"proposed runs the sweep has launched: {sorted(done)}")
    block = block_spec(study, ids)
    path = output if output is not None else source.sweep_dir / ADAPTIVE_DIR / NEXT_FILE
    _write(path, block.text)
    remember_study(source.sweep_dir, study)
    _chosen_table(study, plan.chosen, ids, goal.name)
    typer.echo(f"wrote {path}: {len(ids)} run(s), {plan.chosen['flops'].sum():.4g} {study.unit}; "
               f"launch them with: scalelab sweep {path}")
    return 0


def _grid_study(spec, datasets, filters):
    """The study of the spec's one tuned grid (``scalelab.adaptive.study``: walked by
    coordinate search), or None where the spec is no such grid, or a ``--recipe`` names
    what is no tuned axis of it but a column of the plan (a block, ``extra.recipe``, any
    config key; or a ``pl.col`` condition): then the study is the whole spec
    (``scalelab.adaptive.any_study``)."""
    from scalelab.adaptive.study import load_study

    try:
        study = load_study(spec, datasets=datasets)
    except UserError:
        if not spec.blocks and not filters:  # one grid that is no study: say why
            raise
        return None
    known = {"block", "recipe", *study.plan.table.columns}
    for conds in (filters or {}).values():
        for cond in conds:
            key = cond.partition("=")[0].strip()
            if cond.lstrip().startswith("pl.") or (key not in study.axes and key in known):
                return None
            if not cond.partition("=")[1] or key.endswith(("<", ">", "!")):
                return None
    return study


def _report_verdicts(sweep_dir: Path, runs, names: list[str], filters, loss: str) -> list[str]:
    """The verdict line of every pair of recipes on the finished runs, by the report's rule
    (``analysis.recipes.verdicts.pair_verdict``; an overfitting recipe is held to its best
    observed loss, which the ranking's E-only target cannot use), or why there is none yet."""
    import itertools

    from analysis.errors import AnalysisInputError
    from analysis.recipes.replicates import find_replicates
    from analysis.recipes.verdicts import pair_verdict
    from scalelab.adaptive.recipe_cells import recipe_cells
    from scalelab.cli.runs_table import ensemble_evals

    if runs is None or runs.height == 0:
        return ["none yet (no finished runs)"]
    try:
        cells = recipe_cells(runs, names, filters=filters or None, loss=loss)
        replicates = find_replicates(runs, ensemble_evals(sweep_dir), loss=loss)
        return [pair_verdict(cells.rows[a], cells.rows[b], a, b, replicates)[0]
                for a, b in itertools.combinations(names, 2)]
    except (UserError, AnalysisInputError) as err:
        return [f"none yet ({getattr(err, 'detail', None) or err})"]


def _next_any(source, datasets, filters, target, budget, n, output, loss) -> int:
    """``next`` on the whole spec (``scalelab.adaptive.any_study``,
    ``analysis.adaptive.recipe_design``)."""
    import polars as pl

    from analysis.adaptive.recipe_design import judge_recipes, plan_recipes
    from analysis.fit.identified import MIN_SIZES
    from scalelab.adaptive.any_study import any_block_spec, load_any_study
    from scalelab.adaptive.any_targets import any_target
    from scalelab.adaptive.loop import check_budget
    from scalelab.adaptive.observed import observe
    from scalelab.adaptive.record import ADAPTIVE_DIR, NEXT_FILE, remember_study
    from scalelab.adaptive.targets import summary_text

    study = load_any_study(source.spec, datasets=datasets, filters=filters)
    if budget is not None:
        check_budget(study)
    runs = _runs(source.sweep_dir)
    goal = any_target(study, target, runs=runs)
    obs = observe(study, runs, loss=loss)
    tried = set(obs.launched["key"].to_list())
    plan = plan_recipes(goal, obs.done, obs.pending.select("key", "flops"), tried, batch=n,
                        budget_left=math.inf if budget is None else budget)
    summary, fits = judge_recipes(goal, obs.done, tried)
    cand = study.candidates
    planned = int(cand["planned"].sum())
    waiting = obs.launched.height - obs.done.height
    rule = (f"; a ranking needs >= {MIN_SIZES} settled sizes per recipe (identified.MIN_SIZES: "
            "measured to go wrong on 4)" if goal.name == "ranking" else "")
    typer.echo(f"{source.sweep_dir}: {summary_text(summary, fits)}; {obs.done.height} of "
               f"{cand.height} candidate runs finished ({planned} planned by the spec, "
               f"{cand.height - planned} more seeds of its cells), {waiting} launched without a "
               f"loss (yet), {obs.spent:.4g} {study.unit} spent; recipes "
               f"{', '.join(study.recipes)} from {study.source}{rule}")
    if goal.name == "ranking":  # what the report and compare say of the same runs, now
        for line in _report_verdicts(source.sweep_dir, runs, list(study.recipes), filters, loss):
            typer.echo(f"  the report's verdict now: {line}")
    if plan.chosen.height == 0:
        why = ("every candidate run has been launched" if obs.pending.height == 0 else
               "no proposal fits --budget" if budget is not None else
               "no candidate would shrink the CI (every size settled and its seeds run, or the "
               "rest waits on runs in flight)")
        typer.echo(f"nothing to propose: {why}")
        return 0
    ids = plan.chosen["key"].to_list()
    if done := set(ids) & tried:
        raise RuntimeError(f"proposed runs the sweep has launched: {sorted(done)}")
    block = any_block_spec(study, ids)
    path = output if output is not None else source.sweep_dir / ADAPTIVE_DIR / NEXT_FILE
    _write(path, block.text)
    remember_study(source.sweep_dir, study)
    rows = plan.chosen.join(cand.select("key", "block", "N", "planned",
                                        (pl.col("seed") if "seed" in cand.columns
                                         else pl.lit(None)).alias("seed")), on="key", how="left")
    _any_table(study, rows.sort("rank"), goal.name)
    typer.echo(f"wrote {path}: {len(ids)} run(s), {plan.chosen['flops'].sum():.4g} {study.unit}; "
               f"launch them with: scalelab sweep {path}")
    return 0


def _any_table(study, chosen, target: str) -> None:
    """The proposed runs of a whole-spec study: rank, run id, block, N, seed, recipe, action,
    gain, cost."""
    from rich.table import Table
    from rich.text import Text

    from scalelab.cli.wide import print_wide

    table = Table(title=Text(f"proposed runs (gain: expected reduction of the CI width of "
                             f"{target} by the run's action; cost in {study.unit}; planned: "
                             "in the spec, else a seed it adds)"), title_justify="left")
    heads = ("rank", "run_id", "block", "N", "seed", "planned", "recipe", "action", "gain", "cost")
    for head in heads:
        table.add_column(Text(head), justify="left" if head in ("run_id", "block", "action")
                         else "right")
    for r in chosen.iter_rows(named=True):
        table.add_row(str(r["rank"] + 1), r["key"], r["block"] or "", f"{r['N']:,.0f}",
                      "" if r["seed"] is None else str(r["seed"]), "yes" if r["planned"] else "no",
                      r["recipe"] or "", r["action"] or "", f"{r['gain']:.4g}", f"{r['flops']:.4g}")
    print_wide(table)


def _runs(sweep_dir: Path):
    """The sweep's runs table (collected when stale), or None before anything launched."""
    from scalelab.cli.runs_table import read_runs_table
    from scalelab.store.layout import PLAN_FILE, RUNS_FOLDER

    if not ((sweep_dir / RUNS_FOLDER).is_dir() or (sweep_dir / PLAN_FILE).is_file()):
        return None
    return read_runs_table(sweep_dir)


def _why_none(study, obs, budget: float | None) -> str:
    from scalelab.adaptive.loop import stop_reason

    if obs.pending.height == 0:
        return "every candidate run has been launched"
    if budget is not None and stop_reason(study, obs) == "budget":
        return f"no proposal fits --budget {budget:g}"
    return ("no candidate would shrink the CI (every size settled and its seeds run, or the "
            "rest waits on runs in flight)")


def _write(path: Path, text: str) -> None:
    from scalelab.store.atomic import write_text_atomic

    if path.is_dir():
        raise UserError(f"{path}: is a directory; give a file name with -o")
    try:
        write_text_atomic(path, text)
    except OSError as err:
        raise UserError(f"{path}: cannot write ({err.strerror or err})") from None


def _chosen_table(study, chosen, ids: list[str], target: str) -> None:
    """The proposed runs: rank, run id, N, tuned values, replicate, recipe, action, gain, cost."""
    from rich.table import Table
    from rich.text import Text

    from scalelab.cli.wide import print_wide

    table = Table(title=Text(f"proposed runs (gain: expected reduction of the CI width of "
                             f"{target} by the run's action; cost in {study.unit})"),
                  title_justify="left")
    heads = ("rank", "run_id", "N", *study.axes, "replicate", "recipe", "action", "gain", "cost")
    for head in heads:
        table.add_column(Text(head), justify="left" if head in ("run_id", "action") else "right")
    for rid, r in zip(ids, chosen.iter_rows(named=True)):
        table.add_row(str(r["rank"] + 1), rid, f"{r['N']:,.0f}", *(f"{r[a]:g}" for a in study.axes),
                      str(r["replicate"]), r["recipe"] or "", r["action"] or "", f"{r['gain']:.4g}",
                      f"{r['flops']:.4g}")
    print_wide(table)
