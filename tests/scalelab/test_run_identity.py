"""Run identity (``scalelab/identity.py``): a 128-bit run id, and every identity check on the
full sha256. Two configs whose sha256 share their first 8 hex digits (found by a search
over lr and seed, as an 8-hex id collides by chance from about 65,000 runs) are two runs:
the plan keeps both, a too-short id is refused as a collision naming both, and `scalelab
train` refuses to count one as the other."""

from __future__ import annotations

import dataclasses
import functools
import sys
from pathlib import Path

import polars as pl
import pytest

from scalelab import identity, strict
from scalelab.config import RunConfig, load_run_config
from scalelab.errors import UserError
from scalelab.identity import full_id, run_dir_name, run_id
from scalelab.store.atomic import write_yaml_atomic
from scalelab.sweep.plan.expand import expand
from scalelab.sweep.spec.load import parse_spec
from scalelab.sweep.view.explain import explain

sys.path.insert(0, str(Path(__file__).resolve().parent / "sweep"))
from lifecycle_helpers import cli  # noqa: E402

BASE = """\
model: {preset: cpu-50k}
data: {dataset: default, vocab_size: 256, seq_len: 32, unique_tokens: 2048, epochs: 1.0}
optim: {name: adamw, lr: 3.0e-3}
train: {batch_size: 16, eval_every: 2, eval_batches: 1, checkpoint_every: 4, device: cpu,
        precision: fp32}
"""
"""A 4-step CPU run (2048 tokens / (16 x 32))."""


def _indent(text: str, spaces: int) -> str:
    return "".join(" " * spaces + line + "\n" for line in text.splitlines())


@functools.cache
def _base(tmp: str) -> RunConfig:
    path = Path(tmp) / "base.yaml"
    path.write_text("name: collide\n" + BASE)
    return load_run_config(path)


def _variants(base: RunConfig):
    """Configs of ``base`` with lr k/10,000 (k = 1..100) and seed s (init and data order)."""
    optims = [dataclasses.replace(base.optim, lr=k / 10_000) for k in range(1, 101)]
    for seed in range(20_000):
        train = dataclasses.replace(base.train, init_seed=seed)
        data = dataclasses.replace(base.data, seed=seed)
        for optim in optims:
            yield dataclasses.replace(base, optim=optim, train=train, data=data)


@pytest.fixture(scope="module")
def pair(tmp_path_factory) -> tuple[RunConfig, RunConfig]:
    """Two configs, differing in lr and seed, whose full ids differ and share 8 hex digits."""
    seen: dict[str, RunConfig] = {}
    for cfg in _variants(_base(str(tmp_path_factory.mktemp("base")))):
        prefix = full_id(cfg)[:8]
        if prefix in seen and full_id(seen[prefix]) != full_id(cfg):
            return seen[prefix], cfg
        seen[prefix] = cfg
    raise AssertionError("no 8-hex collision among 2e6 configs")


def _values(cfg: RunConfig) -> tuple[float, int]:
    return cfg.optim.lr, cfg.train.init_seed


def _two_blocks(a: RunConfig, b: RunConfig) -> str:
    """A spec whose blocks are the runs ``a`` and ``b`` (their lr and seed)."""
    blocks = "".join(f"  - name: {name}\n    base: {{optim: {{lr: {lr!r}}}}}\n    seeds: [{seed}]\n"
                     for name, (lr, seed) in (("alpha", _values(a)), ("beta", _values(b))))
    return f"name: twins\nbase:\n{_indent(BASE, 2)}blocks:\n{blocks}"


def _zipped(a: RunConfig, b: RunConfig) -> str:
    """A spec with one grid holding the runs ``a`` and ``b``."""
    (la, sa), (lb, sb) = _values(a), _values(b)
    return (f"name: twins\nbase:\n{_indent(BASE, 2)}zip:\n"
            f"  - optim.lr: [{la!r}, {lb!r}]\n    train.init_seed: [{sa}, {sb}]\n"
            f"    data.seed: [{sa}, {sb}]\n")


def test_the_run_id_has_128_bits_and_prefixes_the_full_sha256():
    cfg = RunConfig()
    rid, full = run_id(cfg), full_id(cfg)
    assert identity.ID_HEX == 32 and len(rid) == 32 and len(full) == 64
    assert full.startswith(rid) and int(full, 16) >= 0
    assert run_dir_name(cfg).endswith(f"-{rid}")
    runs = 1e7  # birthday bound: the chance of any collision in a 1e7-run plan
    assert runs * runs / 2 ** (4 * identity.ID_HEX + 1) < 1e-20


def test_the_pair_shares_8_hex_digits_only(pair):
    a, b = pair
    assert full_id(a)[:8] == full_id(b)[:8] and full_id(a) != full_id(b)
    assert run_id(a) != run_id(b) and run_dir_name(a) != run_dir_name(b)


def test_the_plan_keeps_two_blocks_whose_ids_share_8_hex_digits(pair):
    plan = expand(parse_spec(_two_blocks(*pair), file="twins.yaml"))
    assert {full_id(c) for c in plan.configs} == {full_id(c) for c in pair}
    assert plan.table["block"].to_list() == ["alpha", "beta"]
    assert plan.table["run_id"].n_unique() == 2 and plan.table["run_dir"].n_unique() == 2
    assert plan.table["run_id"].to_list() == [run_id(c) for c in pair]


@pytest.mark.parametrize("spec", [_two_blocks, _zipped], ids=["blocks", "grid"])
def test_a_shared_run_id_is_refused_as_a_collision_naming_both_runs(pair, monkeypatch, spec):
    """With the run id cut to 8 hex digits the pair collides: the plan says so, naming both
    runs and both full ids, not that they 'differ only in operational fields'."""
    monkeypatch.setattr(identity, "ID_HEX", 8, raising=False)
    with pytest.raises(UserError) as info:
        expand(parse_spec(spec(*pair), file="twins.yaml"))
    message = str(info.value)
    assert "collision" in message and "operational" not in message, message
    assert full_id(pair[0]) in message and full_id(pair[1]) in message
    assert message.count("'") >= 4 and len(message.splitlines()) == 1  # both runs named


def test_train_refuses_a_run_dir_whose_config_shares_only_the_prefix(pair, tmp_path, monkeypatch,
                                                                     capsys):
    """Config B's default run directory is A's when the id is 8 hex digits: `train` of B
    refuses it in one line (exit 2) instead of returning A's results."""
    monkeypatch.setattr(identity, "ID_HEX", 8, raising=False)
    monkeypatch.setenv("SCALELAB_QUIET", "1")
    a, b = pair
    paths = []
    for name, cfg in (("a", a), ("b", b)):
        lr, seed = _values(cfg)
        path = tmp_path / f"{name}.yaml"
        path.write_text(f"name: collide\n{BASE}".replace("lr: 3.0e-3", f"lr: {lr!r}")
                        .replace("precision: fp32", f"precision: fp32, init_seed: {seed}")
                        .replace("epochs: 1.0", f"epochs: 1.0, seed: {seed}"))
        assert full_id(load_run_config(path)) == full_id(cfg)
        paths.append(path)
    root = tmp_path / "runs"
    assert cli("train", str(paths[0]), "--root", str(root)) == 0
    (run_dir,) = root.iterdir()
    capsys.readouterr()
    assert cli("train", str(paths[1]), "--root", str(root)) == 2
    out, err = capsys.readouterr()
    assert "nothing to train" not in out
    lines = err.splitlines()
    assert len(lines) == 1 and f"holds run {full_id(a)}, not {full_id(b)}" in lines[0], err
    assert list(root.iterdir()) == [run_dir]


def test_a_150000_run_grid_plans_with_distinct_ids():
    """Past the ~65,000 runs where 8-hex ids collide by chance (no time assertion here:
    bench/plan_scale.py times it)."""
    lrs = ", ".join(repr(k / 100_000) for k in range(1, 101))
    spec = parse_spec(f"name: big\nbase:\n{_indent(BASE, 2)}grid:\n  optim.lr: [{lrs}]\n"
                      f"seeds: {list(range(1500))}\n", file="big.yaml")
    plan = expand(spec)
    assert len(plan) == 150_000
    assert plan.table.select(pl.col("run_id", "run_dir").n_unique()).row(0) == (150_000, 150_000)


def test_explain_compares_full_ids(pair, tmp_path, monkeypatch):
    """Two configs sharing a short run id are still two runs to `scalelab explain`."""
    monkeypatch.setattr(identity, "ID_HEX", 8, raising=False)
    paths = []
    for name, cfg in zip("ab", pair):
        paths.append(tmp_path / f"{name}.yaml")
        write_yaml_atomic(paths[-1], strict.to_dict(cfg))
    ex = explain(*paths)
    assert not ex.same_id
    assert {key for key, _, _ in ex.identity} == {"optim.lr", "train.init_seed", "data.seed"}
    assert "identity field(s) differ" in "\n".join(ex.lines())
