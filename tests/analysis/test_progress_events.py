"""The progress callbacks of the analysis steps, without the CLI (analysis.progress): the
bootstrap's resamples done of its total, a report's sections, the ``reporting`` block that
reaches fits and bootstraps no callback is threaded to, and the throttle of text and JSON
lines."""

from __future__ import annotations

import numpy as np
import polars as pl
import pytest

from analysis.fit.bootstrap import CHUNKS, bootstrap_fit
from analysis.fit.fit import fit_law
from analysis.laws.laws import PowerLaw
from analysis.progress import (
    BootstrapProgress,
    FitProgress,
    SectionProgress,
    Throttle,
    reporting,
)
from analysis.report.sweep_report import write_sweep_report
from analysis.synthetic.runs import synthetic_runs
from analysis.tables.runs import prepare_runs


@pytest.fixture(scope="module")
def power_fit():
    data = prepare_runs(synthetic_runs()).data.filter(pl.col("D") == 1.6e9)
    return fit_law(PowerLaw(), data, warn=False)


def test_bootstrap_reports_resamples_done_of_total(power_fit):
    runs = {}
    for workers in (1, 2):
        seen: list[BootstrapProgress] = []
        runs[workers] = bootstrap_fit(power_fit, n=400, seed=3, workers=workers,
                                      progress=seen.append)
        done = [p.done for p in seen]
        assert done == sorted(set(done)) and all(p.total == 400 for p in seen)  # rising
        assert done[0] == 0 and done[-1] == 400
        assert len(seen) == 1 + CHUNKS  # before the first chunk and after each
        assert [p.final for p in seen] == [False] * CHUNKS + [True]
        assert seen[-1].label == "bootstrap powerlaw" and seen[-1].task == "bootstrap"
        assert seen[-1].line().startswith("bootstrap powerlaw: 400/400 resamples, ")
    # The chunks do not depend on the workers here, nor on anyone watching: same refits.
    np.testing.assert_array_equal(runs[1].samples, runs[2].samples)
    unwatched = bootstrap_fit(power_fit, n=400, seed=3, workers=2, progress=False)
    np.testing.assert_array_equal(runs[2].samples, unwatched.samples)


def test_reporting_reaches_calls_given_no_progress(power_fit):
    data = prepare_runs(synthetic_runs()).data.filter(pl.col("D") == 1.6e9)
    heard: list = []
    with reporting(heard.append):
        power_fit.bootstrap(20, seed=0, workers=1)  # FitResult.bootstrap passes no callback
        fit_law(PowerLaw(), data, warn=False)
        bootstrap_fit(power_fit, n=20, workers=1, progress=False)  # silent on purpose
    boots = [p for p in heard if isinstance(p, BootstrapProgress)]
    assert boots[0].done == 0 and boots[-1].done == 20
    assert sum(p.final for p in boots) == 1  # the progress=False one said nothing
    assert {p.stage for p in heard if isinstance(p, FitProgress)} >= {"screen", "continue"}
    n = len(heard)
    power_fit.bootstrap(20, seed=0, workers=1)  # outside the block: nobody listens
    assert len(heard) == n


def test_sweep_report_sections_reach_their_totals(tmp_path):
    sweep = tmp_path / "sw"
    sweep.mkdir()
    synthetic_runs().write_parquet(sweep / "runs.parquet")
    seen: list = []
    done = write_sweep_report(sweep, bootstrap=4, progress=seen.append)
    sections = [p for p in seen if isinstance(p, SectionProgress)]
    by_report = {r: [p for p in sections if p.report == r]
                 for r in ("infinite_compute.md", "report.md")}
    md = by_report["report.md"]
    assert [p.done for p in md] == list(range(md[-1].total + 1))  # each section, then the end
    assert md[-1].final and md[-1].section == "" and not any(p.final for p in md[:-1])
    names = [p.section for p in md]
    assert names[0].startswith("power law in N, D=") and names[-2:] == ["joint law", ""]
    assert md[-1].total == 9  # 7 values of D, the figures, the joint law
    # synthetic runs name no recipe: that report ends "not written", as its lines say
    ic = by_report["infinite_compute.md"]
    assert ic[0].section == "recipe fits" and ic[-1].final and ic[-1].section == "not written"
    assert any("not written" in line for lines in done.sections.values() for line in lines)
    boots = [p for p in seen if isinstance(p, BootstrapProgress) and p.final]
    # the laws in N have t intervals (recipe_asymptote, the report's engine): only the joint
    # law is bootstrapped
    assert len(boots) == 1 and boots[0].law == "data_constrained" and boots[0].done == 4
    assert any(isinstance(p, FitProgress) for p in seen)


def _fit(stage: str, iteration: int, active: int = 5) -> FitProgress:
    return FitProgress("powerlaw", stage, iteration, 10, 5, active, 1.0, 0.0)


def test_throttle_passes_first_final_and_one_per_period():
    now = [0.0]
    passed: list[FitProgress] = []
    throttle = Throttle(passed.append, every_s=1.0, clock=lambda: now[0])
    for i, t in enumerate([0.0, 0.3, 0.6, 1.1, 1.5], start=1):
        now[0] = t
        throttle(_fit("screen", i))
    throttle(_fit("screen", 6, active=0))  # final: always passes
    now[0] = 1.6
    throttle(_fit("screen", 1))  # the label starts again (the next group): passes
    throttle(_fit("continue", 1))  # another label: its first passes
    throttle(_fit("continue", 2))
    assert [(p.stage, p.iteration) for p in passed] == [
        ("screen", 1), ("screen", 4), ("screen", 6), ("screen", 1), ("continue", 1)]
    assert passed[2].final and passed[0].label == "fit powerlaw screen"


def test_throttle_delay_keeps_quick_steps_silent():
    now = [0.0]
    passed: list[FitProgress] = []
    throttle = Throttle(passed.append, every_s=1.0, clock=lambda: now[0], delay_s=2.0)
    throttle(_fit("screen", 1))
    now[0] = 1.0
    throttle(_fit("screen", 10, active=0))  # over within the delay: nothing at all
    assert passed == []
    for i, t in enumerate([2.0, 2.5, 3.0, 4.5], start=1):  # a step that takes a while
        now[0] = t
        throttle(_fit("continue", i))
    throttle(_fit("continue", 5, active=0))
    assert [p.iteration for p in passed] == [4, 5]  # from 2 s after its first on, and final
