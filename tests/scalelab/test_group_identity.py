"""Where a hash decides which runs are grouped or which cache is reused, the whole sha256
decides it, never a prefix: the ensemble group id, the distillation generation key and
its teacher-text cache, the code snapshot of a Slurm submission.

Each test forces a collision: the module's ``hashlib`` is replaced by one whose digests
all start with the same hex (as many digits as the old ids had, 8, 16 or 12), so two
different identities share the prefix the old code grouped by. The old code pools them;
these tests require them kept apart (issue 36: a colliding pair of lr values, found in
6.6 s, dropped both ensemble groups or mixed their members).
"""

from __future__ import annotations

import hashlib
import types

import numpy as np
import polars as pl
import pytest

from scalelab import strict
from scalelab.config import (
    DataConfig,
    DistillConfig,
    ModelConfig,
    OptimConfig,
    RunConfig,
    TrainConfig,
)
from scalelab.data.format import write_token_dir
from scalelab.model import build_model
from scalelab.store.atomic import write_yaml_atomic
from scalelab.store.status import State, update_status
from scalelab.train.checkpoint.directory import save_checkpoint

VOCAB = 32


def _colliding_hashlib(prefix_hex: int, calls: list) -> types.SimpleNamespace:
    """A stand-in for ``hashlib`` whose sha256 digests all begin with ``prefix_hex`` zeros
    (the rest is the true digest's): different inputs collide on that prefix only."""

    def sha256(data: bytes = b""):
        real = hashlib.sha256(data)

        class Colliding:
            def update(self, more: bytes) -> None:
                real.update(more)

            def hexdigest(self) -> str:
                calls.append(prefix_hex)
                return "0" * prefix_hex + real.hexdigest()[prefix_hex:]

        return Colliding()

    return types.SimpleNamespace(sha256=sha256)


def _corpus(tmp_path) -> str:
    tokens = np.random.default_rng(0).integers(0, VOCAB, 3000)
    return str(write_token_dir(tmp_path / "c", tokens, vocab_size=VOCAB, tokenizer_id="t", eos_id=None,
                               n_documents=1, sources=["rng"]))


def _member(root, *, lr: float, k: int, dataset: str, state: State = State.COMPLETED):
    from scalelab.identity import run_dir_name

    cfg = RunConfig(name=f"lr{lr}_m{k}", model=ModelConfig(preset="cpu-50k"),
                    data=DataConfig(dataset=dataset, seq_len=8, val_tokens=300),
                    optim=OptimConfig(lr=lr), train=TrainConfig(batch_size=4, eval_batches=2), member=k)
    run_dir = root / "runs" / run_dir_name(cfg)
    model = build_model(cfg.model, vocab_size=VOCAB)
    model.init_weights(seed=100 * k + int(lr * 1000), std=0.3)
    write_yaml_atomic(run_dir / "config.yaml", strict.to_dict(cfg))
    save_checkpoint(run_dir, 5, {"model": model.state_dict(), "step": 5})
    update_status(run_dir, state)
    return run_dir


def test_ensemble_groups_that_share_an_id_prefix_stay_apart(tmp_path, monkeypatch):
    import scalelab.ensemble.evaluate as ev
    from scalelab.identity import run_id
    from scalelab.store.layout import ensemble_evals_file

    calls: list = []
    monkeypatch.setattr(ev, "hashlib", _colliding_hashlib(8, calls))
    corpus = _corpus(tmp_path)
    a = [_member(tmp_path, lr=1e-3, k=k, dataset=corpus) for k in (0, 1)]
    b = [_member(tmp_path, lr=2e-3, k=k, dataset=corpus) for k in (0, 1)]
    groups = ev.find_groups(tmp_path)
    assert calls, "the stand-in hash was not used: the test would prove nothing"
    assert sorted(g.run_dirs for g in groups) == sorted([tuple(a), tuple(b)])
    ids = [g.group_id for g in groups]
    assert ids[0][:8] == ids[1][:8] == "0" * 8 and ids[0] != ids[1] and all(len(i) == 64 for i in ids)

    table, out = ev.evaluate_sweep(tmp_path, n_batches=1, batch_size=4, device="cpu")
    members = dict(table.select("run_id", "member_run_ids").unique().iter_rows())
    want = {g.group_id: ",".join(run_id(ev.read_config(d)) for d in g.run_dirs) for g in groups}
    assert members == want  # each group's rows name its own members only
    assert table.filter(pl.col("method") == "logits").height == 4  # K = 1, 2 per group

    # Rows written when the id was 8 hex are replaced by the group they named, not kept beside.
    # (Such a file predates the ensembles' manifests: it has none.)
    legacy = table.with_columns(pl.col("run_id").str.slice(0, 8))
    legacy.write_parquet(ensemble_evals_file(tmp_path))
    ensemble_evals_file(tmp_path).with_name("evals.parquet.manifest.json").unlink()
    again, _ = ev.evaluate_sweep(tmp_path, n_batches=1, batch_size=4, device="cpu")
    assert again.height == table.height and set(again["run_id"]) == set(ids)


def test_a_failed_member_does_not_let_another_block_fill_its_place(tmp_path, monkeypatch):
    """Block A: members 0 and 1 completed; block B: member 0 diverged, 2 completed. With
    ids colliding on 8 hex the old grouping made one ensemble of A0, A1 and B2."""
    import scalelab.ensemble.evaluate as ev

    calls: list = []
    monkeypatch.setattr(ev, "hashlib", _colliding_hashlib(8, calls))
    corpus = _corpus(tmp_path)
    a = [_member(tmp_path, lr=1e-3, k=k, dataset=corpus) for k in (0, 1)]
    _member(tmp_path, lr=2e-3, k=0, dataset=corpus, state=State.DIVERGED)
    _member(tmp_path, lr=2e-3, k=2, dataset=corpus)
    (group,) = ev.find_groups(tmp_path)
    assert calls and group.run_dirs == tuple(a) and group.member_ids == (0, 1)


def _student(seed: int, teachers: tuple[str, ...]) -> RunConfig:
    return RunConfig(data=DataConfig(seq_len=8), distill=DistillConfig(
        teachers=teachers, synthetic_weight=0.5, synthetic_tokens=90, seed=seed))


def test_generation_keys_that_share_a_prefix_name_two_jobs(monkeypatch):
    import scalelab.distill.resolve as resolve

    calls: list = []
    monkeypatch.setattr(resolve, "hashlib", _colliding_hashlib(8, calls))
    one, two = (resolve.generation_key(_student(seed, ("t0",))) for seed in (1, 2))
    assert calls and one[:8] == two[:8] and one != two and len(one) == 64
    assert resolve.generation_key(_student(1, ("t0",))) == one  # same student, same job


def _teacher(root, name: str, seed: int, dataset: str):
    cfg = RunConfig(name=name, model=ModelConfig(preset="cpu-50k"),
                    data=DataConfig(dataset=dataset, seq_len=8, val_tokens=200))
    run_dir = root / "runs" / name
    model = build_model(cfg.model, vocab_size=VOCAB)
    model.init_weights(seed=seed, std=0.2)
    write_yaml_atomic(run_dir / "config.yaml", strict.to_dict(cfg))
    save_checkpoint(run_dir, 1, {"model": model.state_dict(), "step": 1})
    update_status(run_dir, State.COMPLETED)
    return run_dir


def test_teacher_text_cache_is_reused_only_for_the_same_generation(tmp_path, monkeypatch):
    import importlib

    gen = importlib.import_module("scalelab.distill.generate")  # the package exports a function so named
    calls: list = []
    monkeypatch.setattr(gen, "hashlib", _colliding_hashlib(16, calls))
    teachers = [_teacher(tmp_path, f"m{k}", k, _corpus(tmp_path)) for k in range(2)]
    first, second = (gen.GenerationParams(n_tokens=9 * 6, seq_len=8, seed=s, batch_size=8) for s in (1, 2))
    logs: list[str] = []
    out1 = gen.generate(teachers, first, tmp_path / "syn", log=logs.append)
    out2 = gen.generate(teachers, second, tmp_path / "syn", log=logs.append)
    assert calls and out1 != out2 and out1.name[:16] == out2.name[:16] == "0" * 16
    assert ["generating" in line for line in logs if "written" not in line] == [True, True]
    tokens = [(o / "tokens.bin").read_bytes() for o in (out1, out2)]
    assert tokens[0] != tokens[1]

    # A directory named the old way (16 hex) is reused for its own generation only.
    legacy = out1.parent / out1.name[:16]
    out1.rename(legacy)
    logs.clear()
    assert gen.generate(teachers, first, tmp_path / "syn", log=logs.append) == legacy
    assert "cached" in logs[-1]
    (out2 / "meta.json").unlink()  # the second generation is not cached any more
    again = gen.generate(teachers, second, tmp_path / "syn", log=logs.append)
    assert again == out2 and (again / "tokens.bin").read_bytes() == tokens[1]


def test_code_snapshots_that_share_a_hash_prefix_are_two_folders(tmp_path, monkeypatch):
    import scalelab.sweep.run.snapshot as snapshot

    calls: list = []
    monkeypatch.setattr(snapshot, "hashlib", _colliding_hashlib(12, calls))
    roots = []
    for version in ("one", "two"):
        root = tmp_path / f"tree-{version}"
        (root / "scalelab").mkdir(parents=True)
        (root / "scalelab" / "code.py").write_text(f"VERSION = {version!r}\n")
        roots.append(root)
    dests = [snapshot.snapshot_code(tmp_path / "code", root) for root in roots]
    assert calls and dests[0] != dests[1] and dests[0].name[:12] == dests[1].name[:12]
    assert [(d / "scalelab" / "code.py").read_text() for d in dests] == ["VERSION = 'one'\n",
                                                                       "VERSION = 'two'\n"]


@pytest.mark.parametrize("module", ["scalelab.ensemble.evaluate", "scalelab.distill.resolve",
                                    "scalelab.distill.generate", "scalelab.sweep.run.snapshot"])
def test_no_grouping_hash_is_cut_short(module):
    """The modules above compare whole digests: no ``hexdigest()[:`` left in their source."""
    import importlib
    import inspect

    source = inspect.getsource(importlib.import_module(module))
    assert "hexdigest()[:" not in source
