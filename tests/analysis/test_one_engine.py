"""One sweep's runs, three commands, one answer: the report's E and 95% CI of a recipe
(``infinite_compute.analyze``), compare's (``compare_recipes`` on ``recipe_cells``' rows)
and next's (the study read from the spec, its finished runs ``observe``d, the target built
by ``build_target`` and judged by ``target_fits.judge``, the line ``summary_text`` prints)
agree to 1e-9, and so does whether E is identified and, where it is not, the reason.

The sweep: Kim et al.'s tuning grid (arXiv 2509.14786) of 6 sizes x 2 epochs x 2 weight
decays x 3 seeds. Weight decay 1 follows A/x^B + E (the regularized recipe, identified);
weight decay 0.1 (the standard recipe) overfits at the two largest sizes, so its loss rises
with N and the report calls it "not identified". Epochs 2 and 4 differ by less than the
seed noise, so the best cell by replicate 0 and by the mean over seeds can differ. Fails if
the engines, point rules, intervals or identifiability judgements diverge again."""

from __future__ import annotations

import numpy as np
import polars as pl
import pytest

from analysis.adaptive.target_fits import judge
from analysis.fit.power_law import SCALE
from analysis.recipes.compare import compare_recipes
from analysis.recipes.infinite_compute import analyze, reportable
from scalelab.adaptive.observed import observe
from scalelab.adaptive.recipe_cells import recipe_cells
from scalelab.adaptive.study import Study, load_study
from scalelab.adaptive.targets import build_target, summary_text
from scalelab.sweep.spec.load import load_spec

TOL = 1e-9
PRESETS = ("twin-5.6k", "twin-10k", "twin-15k", "twin-26k", "twin-41k", "twin-80k")
SPEC = f"""\
name: one_engine
base:
  model: {{preset: twin-5.6k}}
  data: {{dataset: /nonexistent/x, vocab_size: 256, unique_tokens: 2048, seq_len: 32, epochs: 4}}
  train: {{batch_size: 8, device: cpu}}
launcher: {{executor: debug}}
grid:
  model.preset: [{", ".join(PRESETS)}]
  data.epochs: [2, 4]
  optim.weight_decay: [0.1, 1]
seeds: [0, 1, 2]
"""
LAWS = {0.1: (0.05, 0.5, 2.25), 1.0: (0.04, 0.6, 1.95)}  # wd -> A, B, E (x = N / 1e6)
OVERFIT = (0.0, 0.0, 0.0, 0.03, 0.12, 0.3)  # wd 0.1's extra loss at each size, smallest first
EPOCH_PENALTY = {2.0: 0.002, 4.0: 0.0}
NOISE = 0.004


def study(tmp_path) -> Study:
    path = tmp_path / "one_engine.yaml"
    path.write_text(SPEC)
    return load_study(load_spec(path))


def sweep_runs(st: Study, seed: int) -> pl.DataFrame:
    """The runs table ``scalelab collect`` would write for the whole grid (every run done)."""
    rng = np.random.default_rng(seed)
    plan = st.plan.table
    sizes = sorted(set(plan["N"].to_list()))
    losses = []
    for n, ep, wd in plan.select("N", "data.epochs", "optim.weight_decay").iter_rows():
        A, B, E = LAWS[float(wd)]
        over = OVERFIT[sizes.index(n)] if float(wd) == 0.1 else 0.0
        losses.append(A * (n / SCALE) ** -B + E + over + EPOCH_PENALTY[float(ep)]
                      + rng.normal(0, NOISE))
    return plan.select("run_id", "name", "model.preset", "data.epochs", "optim.weight_decay",
                       "seed", "N", "D_unique", "D_total").with_columns(
        pl.lit("tuned").alias("block"), pl.lit("COMPLETED").alias("state"),
        pl.Series("final_loss", losses))


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_report_compare_and_next_give_one_E_CI_and_reason_on_replicate_seeds(tmp_path, seed):
    st = study(tmp_path)
    runs = sweep_runs(st, seed)
    assert runs.group_by("N", "data.epochs", "optim.weight_decay").len()["len"].min() == 3
    report = analyze(runs)
    names = ("regularized", "standard")
    cells = recipe_cells(runs, names)
    cmp = compare_recipes(cells.rows["regularized"], cells.rows["standard"], names=names, n_boot=20)
    done = observe(st, runs).done
    said = {}
    for i, name in enumerate(names):
        fit = report.fits[name]
        why = reportable(fit)
        assert (why is None) == (name == "regularized"), why  # the sweep is built so
        # compare
        mine = cmp.asymptotes[i]
        assert mine.why_not == why
        # next, as `scalelab next --target NAME.E` computes and prints it
        target = build_target(st, f"{name}.E", runs=runs)
        summary, fits = judge(target, done)
        nxt = fits[name]
        assert nxt.n_sizes == len(PRESETS)  # a complete grid: every size settled
        line = summary_text(summary, fits)
        said[name] = line
        assert "\n" not in line
        if why is None:
            lo, hi = fit.ci()
            assert cmp.E[i] == pytest.approx(fit.E, abs=TOL)
            assert (mine.lo, mine.hi) == pytest.approx((lo, hi), abs=TOL)
            assert nxt.E == pytest.approx(fit.E, abs=TOL)
            assert nxt.ci == pytest.approx((lo, hi), abs=TOL)
            assert (summary.value, summary.lo, summary.hi) == pytest.approx((fit.E, lo, hi), abs=TOL)
        else:
            assert why.startswith("not identified: the loss rises again with x")
            assert line.startswith(f"{name}.E {why}"), line  # the report's reason, no E
            assert f"{name}.E =" not in line and np.isnan(summary.value)
        assert nxt.why_not == why
        assert nxt.asymptote.fit.x == pytest.approx(fit.x, abs=0)  # the report's points
        assert nxt.asymptote.fit.y == pytest.approx(fit.y, abs=TOL)
    assert said["regularized"].startswith("regularized.E = ")


# the standard recipe's loss against U / 1e6 at N = 80k: A, B, C (2.59 at U0, as its tuned runs)
DATA_LAW = (0.075, 0.4, 1.7)
DATA_U = (512, 1024, 4096, 8192, 16384, 65536)


def with_data_block(runs: pl.DataFrame, budgets, law, seed: int) -> pl.DataFrame:
    """``runs`` plus a ``data`` block: the standard recipe at the largest size and other
    unique-token budgets U, its loss A / (U / 1e6)^B + C + noise."""
    rng = np.random.default_rng(100 + seed)
    A, B, C = law
    rows = [{"run_id": f"data-{u}", "name": f"data_u{u}", "model.preset": PRESETS[-1],
             "data.epochs": 4, "optim.weight_decay": 0.1, "seed": 0, "N": runs["N"].max(),
             "D_unique": float(u), "D_total": float(4 * u), "block": "data",
             "state": "COMPLETED", "final_loss": A * (u / SCALE) ** -B + C + rng.normal(0, 0.002)}
            for u in budgets]
    return pl.concat([runs, pl.DataFrame(rows).cast({c: runs[c].dtype for c in rows[0]})])


@pytest.mark.parametrize("seed", [0, 1])
def test_next_multiplier_is_the_reports(tmp_path, seed):
    """`next --target multiplier`: the report's data law (its F-test choice), L_ref and
    bootstrap CI, for the regularized recipe's E: equal to the report's row to 1e-9."""
    st = study(tmp_path)
    runs = with_data_block(sweep_runs(st, seed), DATA_U, DATA_LAW, seed)
    report = analyze(runs)
    row = report.multipliers.filter(pl.col("recipe") == "regularized asymptote").row(0, named=True)
    assert row["why"] is None  # the sweep is built so
    target = build_target(st, "multiplier", runs=runs)
    summary, fits = judge(target, observe(st, runs).done)
    assert (summary.value, summary.lo, summary.hi) == pytest.approx(
        (row["data_multiplier"], row["lo"], row["hi"]), abs=TOL)
    assert target.law.why == report.data_law.why and target.L_ref == report.ref_loss
    line = summary_text(summary, fits)
    assert line.startswith("regularized.multiplier = ") and "\n" not in line


def test_next_multiplier_refused_as_the_report_refuses_it(tmp_path):
    """A data law whose floor C lies above the regularized E: the report gives no
    multiplier and its reason; next says the same reason in one line, with no number. Too
    few budgets U for a data law: one line saying why (choose_data_law's reason)."""
    from scalelab.errors import UserError

    st = study(tmp_path)
    high = (0.041, 0.4, 2.1)  # C = 2.1 > regularized E ~ 1.95; 2.59 at U0 as the tuned runs
    runs = with_data_block(sweep_runs(st, 0), DATA_U, high, 0)
    report = analyze(runs)
    row = report.multipliers.filter(pl.col("recipe") == "regularized asymptote").row(0, named=True)
    assert row["why"] and np.isnan(row["data_multiplier"])
    summary, fits = judge(build_target(st, "multiplier", runs=runs), observe(st, runs).done)
    line = summary_text(summary, fits)
    assert line.startswith(f"regularized.multiplier: none ({row['why']})"), line
    assert "\n" not in line and np.isnan(summary.value)
    base = sweep_runs(st, 0)
    few = with_data_block(base, DATA_U[:1], DATA_LAW, 0)  # U0 and one more budget: 2 in all
    with pytest.raises(UserError) as err:
        build_target(st, "multiplier", runs=few)
    msg = str(err.value)
    assert "\n" not in msg and "no data law L(U) (2 budgets for the data law A/U^B: need >= 3)" in msg, msg
