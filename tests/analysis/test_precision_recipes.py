"""report.md's precision law, one per named recipe (``analysis.recipes.law_groups``,
``analysis.report.precision_md``).

The study a user brings: Muon and AdamW, each at bf16, fp8 and mxfp4 (the precision twin's
4 sizes x 4 epoch counts, 0.01 nats of noise). Truth: Muon's gamma 4.0 bits (fp8 m = 0.881,
mxfp4 m = 0.667 against bf16), AdamW's gamma 1.5 (0.995, 0.941), AdamW's E 0.03 nats above
Muon's. One law over the table, as before, keeps each (precision, N, D, U) point's best cell
whichever optimizer won it and reports fp8 0.984 [0.964, 0.998], mxfp4 0.926 [0.909, 0.938]:
neither optimizer's truth, under the table's name. Per recipe each truth is inside its own
95% profile CI (measured: Muon fp8 0.879 [0.873, 0.886], mxfp4 0.663 [0.657, 0.668]; AdamW
0.997 [0.984, 1.009], 0.937 [0.927, 0.950]).
"""

from __future__ import annotations

import warnings

import polars as pl
import pytest

from analysis.fit.precision import fit_precision
from analysis.recipes.law_groups import precision_groups
from analysis.report.precision_md import precision_section
from analysis.synthetic.precision import PRECISION_TRUTH, synthetic_precision_runs, true_multipliers
from analysis.tables.runs import prepare_runs

FORMATS = ("bf16", "fp8", "mxfp4")
GAMMA = {"muon": 4.0, "adamw": 1.5}


def study(seed: int = 0) -> pl.DataFrame:
    parts = []
    for i, (name, gamma) in enumerate(GAMMA.items()):
        truth = {"gamma": gamma, "E": PRECISION_TRUTH["E"] + 0.03 * i}
        runs = synthetic_precision_runs(seed + 1000 * i, truth=truth, formats=FORMATS)
        parts.append(runs.with_columns(pl.lit(name).alias("recipe"), pl.lit(name).alias("optim.name"),
                                       (pl.lit(name) + pl.col("run_id")).alias("run_id")))
    return prepare_runs(pl.concat(parts)).data


def fit(data: pl.DataFrame):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return fit_precision(data, trends=False)


def test_each_recipe_recovers_its_own_multipliers_where_one_law_recovers_neither():
    data = study(0)
    groups, notes = precision_groups(data)
    assert [g.recipe for g in groups] == ["adamw", "muon"] and notes == []
    for g in groups:
        truth = true_multipliers(GAMMA[g.recipe], FORMATS, "bf16")
        s = fit(g.runs)
        assert s.reference == "bf16" and s.data.height == 48
        for m in s.multipliers:
            assert m.why_not is None and m.ci[0] <= truth[m.fmt] <= m.ci[1], (g.recipe, m)
    mixed = {m.fmt: m for m in fit(data).multipliers}  # the old section: one law over both
    for name, gamma in GAMMA.items():
        truth = true_multipliers(gamma, FORMATS, "bf16")
        assert not all(mixed[f].ci[0] <= truth[f] <= mixed[f].ci[1] for f in ("fp8", "mxfp4")), name


def test_filters_name_the_recipes_too():
    data = study(0).drop("recipe")
    groups, _ = precision_groups(data, {"m": ["optim.name=muon"], "a": ["optim.name=adamw"]})
    assert [(g.recipe, g.runs.height) for g in groups] == [("m", 48), ("a", 48)]


def test_recipes_that_are_precisions_give_one_law_with_a_note():
    data = study(0).filter(pl.col("recipe") == "muon")
    filters = {f: [f"train.precision={f}"] for f in FORMATS}
    groups, notes = precision_groups(data, filters)
    assert [(g.recipe, g.runs.height) for g in groups] == [(None, 48)]
    assert len(notes) == 1 and "each recipe" in notes[0].lower() and "bf16 (bf16)" in notes[0]


def test_a_recipe_with_one_precision_gets_no_law_and_a_note():
    data = study(0)
    data = data.filter((pl.col("recipe") == "muon") | (pl.col("train.precision") == "bf16"))
    groups, notes = precision_groups(data)
    assert [g.recipe for g in groups] == ["muon"]
    assert notes == ["One precision, no precision law: adamw (bf16)."]


def test_runs_in_no_recipe_are_named():
    data = study(0).with_columns(pl.when(pl.col("recipe") == "adamw").then(None).otherwise(pl.col("recipe"))
                                 .alias("recipe"))
    groups, notes = precision_groups(data)
    assert [g.recipe for g in groups] == ["muon"]
    assert notes == ["48 run(s) belong to no recipe (the runs' `recipe` column (extra.recipe)): in no "
                     "precision law."]


def test_blocks_alone_are_no_recipes():
    """A sweep's blocks are its layout (the precision twin's ``grid`` and ``grid-e4``): one law."""
    data = study(0).drop("recipe").with_columns(
        pl.when(pl.col("epochs") == 1).then(pl.lit("grid-e1")).otherwise(pl.lit("grid")).alias("block"))
    groups, notes = precision_groups(data)
    assert [(g.recipe, g.runs.height) for g in groups] == [(None, 96)] and notes == []


@pytest.mark.slow
def test_report_section_per_recipe_and_the_comparison(tmp_path):
    status: list[str] = []
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        md = "\n".join(precision_section(study(0), tmp_path, status))
    assert status == ["precision law, adamw: fitted on 48 runs, 3 formats",
                      "precision law, muon: fitted on 48 runs, 3 formats"]
    assert "## Training precision, muon: effective-parameter multipliers (48 runs)" in md
    assert "## Training precision, adamw: effective-parameter multipliers (48 runs)" in md
    for name in GAMMA:
        assert f"![training precision, {name}](precision-{name}.png)" in md
        assert (tmp_path / f"precision-{name}.png").stat().st_size > 10_000
    assert not (tmp_path / "precision.png").exists()
    table = md[md.index("### Multipliers across recipes"):]
    assert "| format | adamw | muon | reading |" in table
    for fmt in ("fp8", "mxfp4"):
        line = next(ln for ln in table.splitlines() if ln.startswith(f"| {fmt} |"))
        assert line.endswith("| muon loses more than adamw |"), line


@pytest.mark.slow
def test_notes_sit_under_the_section_heading(tmp_path):
    """The fallback's note is the section's, not a stray line after the previous section."""
    data = study(0).filter(pl.col("recipe") == "muon")
    status: list[str] = []
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        md = precision_section(data, tmp_path, status, recipes={f: [f"train.precision={f}"] for f in FORMATS})
    assert md[0] == "## Training precision: effective-parameter multipliers (48 runs)" and md[1] == ""
    assert md[2].startswith("- Each recipe (--recipe filters) ran one precision") and md[3] == ""
    assert status == ["precision law: fitted on 48 runs, 3 formats"]
    assert (tmp_path / "precision.png").is_file()
