"""``scalelab sweep FILE`` of runs of the sweep's recorded adaptive study (the block
``scalelab next`` writes) keeps the study as the sweep's ``spec.yaml``, so ``collect``
marks every run of the study ``in_spec`` and the analyses leave none out; a spec with a
run outside the study still replaces ``spec.yaml`` as before.

The study is ``adaptive_train``'s small grid (8 twin sizes x 3 epochs x 3 weight decays x 3
seeds) on the debug backend, trained in this process by ``adaptive_train:train``; its seed
design is launched by ``run_adaptive_sweep`` (``max_rounds=0``: no round after it).
"""

from __future__ import annotations

from pathlib import Path

import polars as pl
import pytest
from adaptive_train import PRESETS, spec_text

from analysis.tables.runs import drop_stale
from scalelab.adaptive.loop import run_adaptive_sweep
from scalelab.adaptive.study import load_study
from scalelab.cli import main
from scalelab.sweep.plan.expand import load_plan
from scalelab.sweep.spec.load import load_spec

TARGET = "adaptive_train:train"
NAME = "ad"
KEPT = "runs of the adaptive study"


@pytest.fixture(autouse=True)
def wide(monkeypatch):
    monkeypatch.setenv("COLUMNS", "400")


def run(argv, capsys) -> tuple[int, str, str]:
    with pytest.raises(SystemExit) as done:
        main([str(a) for a in argv])
    out, err = capsys.readouterr()
    return int(done.value.code or 0), " ".join(out.split()), err


def seeded(tmp_path: Path) -> tuple[Path, Path, set[str]]:
    """(the study's spec file, its sweep directory, the seed design's run ids): the study
    with its seed design launched and finished."""
    path = tmp_path / "study.yaml"
    path.write_text(spec_text(NAME, seeds=(0, 1, 2)))
    study = load_study(load_spec(path))
    budget = float(study.candidates["flops"].sum())
    res = run_adaptive_sweep(path, budget, root=tmp_path / "root", executor="debug",
                             target=TARGET, max_rounds=0)
    assert res.stopped == "max_rounds" and len(res.launched) == res.runs == 4
    return path, res.sweep_dir, set(res.launched)


def sweep(file: Path, root: Path, capsys) -> str:
    code, out, err = run(["sweep", file, "--root", root, "--executor", "debug",
                          "--train-target", TARGET], capsys)
    assert code == 0, out + err
    return out


def collected(sweep_dir: Path, capsys) -> pl.DataFrame:
    """``scalelab collect SWEEP``'s runs.parquet."""
    code, out, err = run(["collect", sweep_dir], capsys)
    assert code == 0, out + err
    return pl.read_parquet(sweep_dir / "runs.parquet")


def test_next_blocks_keep_the_study_as_the_sweeps_spec(tmp_path, capsys):
    path, sweep_dir, seed = seeded(tmp_path)
    assert (sweep_dir / "spec.yaml").read_text() == path.read_text()  # the loop's copy
    study_ids = set(load_plan(path).table["run_id"].to_list())
    launched = set(seed)
    for _ in range(2):  # two rounds of next + sweep, from the sweep directory
        code, out, err = run(["next", sweep_dir, "-n", 4], capsys)
        assert code == 0, out + err
        block = sweep_dir / "adaptive" / "next.yaml"
        ids = set(load_plan(block).table["run_id"].to_list())
        assert len(ids) == 4 and ids <= study_ids and not ids & launched
        out = sweep(block, tmp_path / "root", capsys)
        assert "4 launched on debug" in out
        assert (sweep_dir / "spec.yaml").read_text() == path.read_text()
        launched |= ids
        runs = collected(sweep_dir, capsys)
        assert set(runs["run_id"].to_list()) == launched and runs.height == len(launched)
        assert runs["in_spec"].to_list() == [True] * runs.height  # the seed design too
        assert (runs["state"] == "COMPLETED").all()
        assert drop_stale(runs)[1] is None  # report / fit / compare / next leave none out
        assert (f"{block}: {KEPT} {sweep_dir / 'adaptive' / 'study.yaml'}; the sweep's "
                "spec.yaml stays the study's") in out
    assert len(launched) == 12 and seed < launched


def test_a_spec_with_a_run_outside_the_study_replaces_the_sweeps_spec(tmp_path, capsys):
    """Same name (same sweep directory), one size at seeds 0 and 5: seed 5 is no replicate
    of the study, so the spec is copied as before and the study's other runs leave the spec."""
    path, sweep_dir, seed = seeded(tmp_path)
    other = tmp_path / "other.yaml"
    other.write_text(spec_text(NAME, presets=PRESETS[:1], seeds=(0, 5)))
    plan_ids = set(load_plan(other).table["run_id"].to_list())
    study_ids = set(load_plan(path).table["run_id"].to_list())
    assert plan_ids & study_ids and plan_ids - study_ids  # some runs in the study, some not
    out = sweep(other, tmp_path / "root", capsys)
    assert KEPT not in out
    assert (sweep_dir / "spec.yaml").read_text() == other.read_text()
    runs = collected(sweep_dir, capsys)
    assert set(runs["run_id"].to_list()) == seed | plan_ids
    in_spec = dict(zip(runs["run_id"].to_list(), runs["in_spec"].to_list()))
    assert in_spec == {rid: rid in plan_ids for rid in in_spec}
    assert not all(in_spec[rid] for rid in seed)  # earlier runs of the study: out of spec
    assert drop_stale(runs)[1] is not None


def test_without_a_recorded_study_the_block_replaces_the_sweeps_spec(tmp_path, capsys):
    """The block alone (``<sweep>/adaptive/study.yaml`` gone): copied as before."""
    _, sweep_dir, seed = seeded(tmp_path)
    code, out, err = run(["next", sweep_dir, "-n", 2], capsys)
    assert code == 0, out + err
    block = sweep_dir / "adaptive" / "next.yaml"
    (sweep_dir / "adaptive" / "study.yaml").unlink()
    out = sweep(block, tmp_path / "root", capsys)
    assert KEPT not in out and "2 launched on debug" in out
    assert (sweep_dir / "spec.yaml").read_text() == block.read_text()
    runs = collected(sweep_dir, capsys)
    in_spec = dict(zip(runs["run_id"].to_list(), runs["in_spec"].to_list()))
    assert [in_spec[rid] for rid in seed] == [False] * len(seed)
    assert sum(in_spec.values()) == 2


def test_a_narrowed_spec_of_the_users_own_replaces_the_sweeps_spec(tmp_path, capsys):
    """The study's spec cut to its two smallest sizes, launched by the user: every run is a
    run of the study, but it is no ``next`` block, so it is the sweep's new spec and the seed
    design's runs at other sizes leave it, as after any spec change."""
    path, sweep_dir, seed = seeded(tmp_path)
    narrow = tmp_path / "narrow.yaml"
    narrow.write_text(spec_text(NAME, presets=PRESETS[:2], seeds=(0, 1, 2)))
    plan_ids = set(load_plan(narrow).table["run_id"].to_list())
    assert plan_ids <= set(load_plan(path).table["run_id"].to_list())
    out = sweep(narrow, tmp_path / "root", capsys)
    assert KEPT not in out
    assert (sweep_dir / "spec.yaml").read_text() == narrow.read_text()
    runs = collected(sweep_dir, capsys)
    in_spec = dict(zip(runs["run_id"].to_list(), runs["in_spec"].to_list()))
    assert in_spec == {rid: rid in plan_ids for rid in in_spec}
