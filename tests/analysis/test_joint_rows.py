"""report.md's joint laws: one per recipe, each (N, D, U) point its best cell
(``analysis.recipes.law_groups``, ``analysis.report.joint_md``).

The study a user brings: Muon against AdamW, each at 2 learning rates, 5 sizes, 4 unique-token
budgets and 4 epoch counts, drawn from Muennighoff et al. 2023's data-constrained law
(arXiv 2305.16264, eq. 5: D' = U + U R_D (1 - exp(-(D/U - 1)/R_D)), no excess-parameter term)
with a known truth per optimizer; the learning rate 3x off costs 0.03 nats. Before, the report
ignored ``--recipe`` and fitted one law over all runs of both optimizers and both rates.
"""

import numpy as np
import polars as pl
import pytest

from analysis.errors import AnalysisInputError
from analysis.recipes.law_groups import joint_groups
from analysis.report.report import write_report_status
from analysis.tables.cells import best_cell_runs, cell_columns

TRUTH = {"muon": {"E": 1.75, "A": 380.0}, "adamw": {"E": 1.85, "A": 420.0}}
B, ALPHA, BETA, R_D = 400.0, 0.34, 0.28, 15.0
FILTERS = {"muon": ["optim.name=muon"], "adamw": ["optim.name=adamw"]}


def _loss(N, D, U, E, A):
    d_eff = U + U * R_D * (1 - np.exp(-(D / U - 1) / R_D))
    return E + A / N**ALPHA + B / d_eff**BETA


def study(noise: float = 0.003, seed: int = 0) -> pl.DataFrame:
    """Runs in the shape of ``prepare_runs``' output (N, D, U, loss, config columns)."""
    rng = np.random.default_rng(seed)
    rows = []
    for opt, t in TRUTH.items():
        for N in (2e7, 5e7, 1e8, 2e8, 4e8):
            for U in (1e9, 2e9, 4e9, 8e9):
                for epochs in (1, 2, 4, 8):
                    for lr, penalty in ((3e-3, 0.0), (1e-2, 0.03)):
                        D = U * epochs
                        rows.append({"N": N, "D": D, "U": U, "D_total": D, "D_unique": U,
                                     "optim.name": opt, "optim.lr": lr, "seed": 0,
                                     "loss": _loss(N, D, U, **t) + penalty + noise * rng.standard_normal()})
    return pl.DataFrame(rows)


def test_best_cell_runs_keeps_each_points_best_cell_with_all_its_seeds():
    rows = [{"N": 1.0, "D": 1.0, "U": 1.0, "optim.lr": lr, "seed": s, "loss": base + 0.001 * s}
            for lr, base in ((1e-3, 2.0), (3e-3, 1.9), (1e-2, 2.1)) for s in (0, 1, 2)]
    rows += [{"N": 2.0, "D": 1.0, "U": 1.0, "optim.lr": 1e-3, "seed": 0, "loss": 1.5}]
    frame = pl.DataFrame(rows)
    best = best_cell_runs(frame, cell_columns(frame), ("N", "D", "U"))
    at_1 = best.filter(pl.col("N") == 1.0)
    assert at_1["optim.lr"].unique().to_list() == [3e-3] and sorted(at_1["seed"]) == [0, 1, 2]
    assert best.filter(pl.col("N") == 2.0).height == 1 and set(best.columns) == set(frame.columns)


def test_groups_follow_the_recipes_and_the_data_block_joins_the_reference():
    frame = pl.DataFrame({
        "N": [1.0, 2.0, 1.0, 2.0, 1.0, 1.0, 1.0],
        "D": [4.0] * 4 + [2.0, 8.0, 4.0],
        "U": [4.0] * 4 + [2.0, 8.0, 4.0],
        "block": ["tuned"] * 4 + ["data", "data", "ensemble"],
        "optim.weight_decay": [0.1, 0.1, 1.0, 1.0, 0.1, 0.1, 1.0],
        "loss": [3.0, 2.5, 2.9, 2.4, 3.2, 2.8, 2.0],
    })
    groups, source = joint_groups(frame)  # Kim's block layout
    by = {g.name: g for g in groups}
    assert "blocks 'tuned'" in source and set(by) == {"standard", "regularized"}
    assert sorted(by["standard"].runs["D"]) == [2.0, 4.0, 4.0, 8.0]  # + the data block's budgets
    assert by["regularized"].runs["loss"].to_list() == [2.9, 2.4]  # best over wd; no members
    # No recipes at all: one group, without ensemble members or distilled students.
    (only,), _ = joint_groups(frame.drop("block", "optim.weight_decay").with_columns(
        pl.Series("block", ["a"] * 6 + ["ensemble"])))
    assert only.runs.height == 6 and only.n_input == 6
    with pytest.raises(AnalysisInputError, match="optim.nme"):  # a bad filter is bad input
        joint_groups(frame, {"x": ["optim.nme=muon"]})
    # Recipes from the recipe column: the untagged data block joins the reference recipe,
    # --reference's when given ("adamw", the first by name, otherwise).
    tagged = frame.with_columns(pl.Series("recipe", ["muon", "muon", "adamw", "adamw", None, None, None]))
    for reference, joined in ((None, "adamw"), ("muon", "muon")):
        by = {g.name: g.runs.height for g in joint_groups(tagged, reference=reference)[0]}
        assert by == {"adamw": 2, "muon": 2, joined: 4}
    with pytest.raises(AnalysisInputError, match="reference recipe 'nope'"):
        joint_groups(tagged, reference="nope")


def test_report_fits_one_joint_law_per_recipe_and_recovers_each_truth(tmp_path):
    path, status = write_report_status(study(), tmp_path, bootstrap=0, recipes=FILTERS, progress=False)
    text = path.read_text()
    es = {}
    # --recipe reaches report.md: the laws in N are per recipe and budget, not per D.
    assert any(s.startswith("power law in N, muon, U=1e+09") for s in status), status
    for name, t in TRUTH.items():
        line = next(s for s in status if s.startswith(f"joint law, {name}:"))
        assert "fitted on 80 runs at 80 (N, D, U) points (80 of 160 runs: each point's best cell)" in line
        section = text[text.index(f"## data_constrained joint law ({name})"):]
        rows = {r.split("|")[1].strip(): r.split("|")[2].strip() for r in section.splitlines()[4:13]
                if r.startswith("| ")}
        # Tolerances, from seeds 0-2 of this design (5 sizes pin E and R_D* loosely): E within
        # 0.06 nats (measured 0.004-0.058), R_D* within 30% (measured 11-27%) or named not
        # identified (seed 0, muon). One law over both optimizers and both rates (the old
        # report) gave R_D* = 54.6 in all three seeds, 3.6x the truth.
        assert abs(float(rows["E"]) - t["E"]) <= 0.06, (name, rows)
        r_d = rows["R_D"]
        assert r_d.startswith("not identified") or abs(float(r_d) - R_D) <= 0.3 * R_D, (name, rows)
        assert rows["R_N"].startswith("not identified")  # the truth has no excess-parameter term
        es[name] = float(rows["E"])
    assert 0.03 <= es["adamw"] - es["muon"] <= 0.17  # truth 0.10; measured 0.061-0.135
    for stem in ("residuals-muon", "residuals-adamw", "loss_vs_epochs-muon", "loss_vs_epochs-adamw"):
        assert (tmp_path / f"{stem}.png").is_file() and f"({stem}.png)" in text


def test_figure_stems_are_safe_and_unique_per_recipe():
    from analysis.recipes.law_groups import JointGroup
    from analysis.report.joint_md import _labels

    groups = [JointGroup(n, pl.DataFrame(), 0) for n in ("a b", "a_b", "../x", "")]
    assert [stem for _, stem in _labels(groups)] == ["-a_b", "-a_b-2", "-x", "-recipe"]
    assert _labels(groups[:1]) == [("joint law", "")]
