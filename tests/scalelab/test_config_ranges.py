"""Numeric ranges: every numeric config field declares the values the trainer, the model
and the optimizers accept, and a dry-run refuses the rest in one line (exit 2) naming the
file, the key, the value and the range, instead of a run that crashes or misbehaves."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest
import yaml
from test_bad_input import assert_one_line, cli, write

from scalelab import strict
from scalelab.config import RunConfig, load_run_config
from scalelab.errors import UserError
from scalelab.sweep.spec import keys
from scalelab.sweep.spec.load import parse_spec

PLANNABLE = {"data": {"vocab_size": 256, "unique_tokens": 4096}}
"""A base the planner can plan without reading a dataset."""


def _spec(tmp_path: Path, base: dict, **top) -> Path:
    tree = {"name": "ranges", "base": _merge(PLANNABLE, base), **top}
    return write(tmp_path / "spec.yaml", yaml.safe_dump(tree, sort_keys=False))


def _merge(a: dict, b: dict) -> dict:
    out = dict(a)
    for k, v in b.items():
        out[k] = _merge(out[k], v) if isinstance(v, dict) and isinstance(out.get(k), dict) else v
    return out


def _nested(key: str, value) -> dict:
    head, _, rest = key.partition(".")
    return {head: _nested(rest, value) if rest else value}


# (dotted key, a value training refuses or misuses, the key path and range in the message)
BAD = [
    ("train.grad_clip", -1, "base.train.grad_clip: -1.0 is out of range: expected > 0"),
    ("optim.lr", -1e-3, "base.optim.lr: -0.001 is out of range: expected >= 0"),
    ("optim.weight_decay", -0.1, "base.optim.weight_decay: -0.1 is out of range: expected >= 0"),
    ("optim.betas", [2, -1], "base.optim.betas[0]: 2.0 is out of range: expected in [0, 1)"),
    ("optim.eps", -1e-8, "base.optim.eps: -1e-08 is out of range: expected > 0"),
    ("train.min_lr_ratio", -0.5,
     "base.train.min_lr_ratio: -0.5 is out of range: expected in [0, 1]"),
    ("train.init_std", -0.02, "base.train.init_std: -0.02 is out of range: expected > 0"),
    ("member", -5, "base.member: -5 is out of range: expected in [0, 10000)"),
    ("train.eval_batches", 0, "base.train.eval_batches: 0 is out of range: expected >= 1"),
    ("train.checkpoint_every", 0, "base.train.checkpoint_every: 0 is out of range: expected >= 1"),
    ("train.log_every", 0, "base.train.log_every: 0 is out of range: expected >= 1"),
    ("optim.ns_steps", -1, "base.optim.ns_steps: -1 is out of range: expected in [1, 100]"),
    ("optim.ns_steps", 101, "base.optim.ns_steps: 101 is out of range: expected in [1, 100]"),
]


@pytest.mark.parametrize(("key", "value", "needle"), BAD, ids=[f"{b[0]}={b[1]}" for b in BAD])
def test_dry_run_refuses_what_training_refuses(tmp_path, key, value, needle):
    base = _nested(key, value)
    if key == "optim.ns_steps":
        base = _merge(base, {"optim": {"name": "muon"}})
    spec = _spec(tmp_path, base)
    proc, _ = cli(tmp_path, "sweep", spec, "--dry-run")
    assert_one_line(proc, f"{spec}:", needle)


def test_train_refuses_a_negative_grad_clip_before_training(tmp_path):
    """grad_clip -1 trained to the end, ascending the gradient; now nothing starts."""
    proc, _ = cli(tmp_path, "train", "sweeps/examples/train_cpu.yaml", "train.grad_clip=-1")
    assert_one_line(proc, "override 'train.grad_clip=-1'", "train.grad_clip: -1.0 is out of range",
                    "expected > 0 (null = no clipping)")
    assert not (tmp_path / "root").exists()


def test_grid_and_derived_values_are_checked_where_they_are_written(tmp_path):
    spec = _spec(tmp_path, {}, grid={"optim.eps": [1e-8, -1e-8]})
    proc, _ = cli(tmp_path, "sweep", spec, "--dry-run")
    assert_one_line(proc, "grid.optim.eps[1]: -1e-08 is out of range: expected > 0")
    spec = _spec(tmp_path, {}, derive={"optim.lr": "-3e-3 * 128 / model.d_model"})
    proc, _ = cli(tmp_path, "sweep", spec, "--dry-run")
    assert_one_line(proc, "derive.optim.lr: run 'ranges': optim.lr:",
                    "is out of range: expected >= 0")


def test_missing_teacher_path_is_refused_by_the_plan(tmp_path):
    missing = tmp_path / "nowhere" / "runs" / "teacher-0123abcd"
    spec = _spec(tmp_path, {"distill": {"teachers": [str(missing)], "synthetic_weight": 0.5,
                                        "synthetic_tokens": 4096}})
    proc, _ = cli(tmp_path, "sweep", spec, "--dry-run")
    assert_one_line(proc, "base.distill.teachers", f"teacher run {missing} does not exist")


def test_a_teacher_name_the_same_sweep_may_train_is_left_to_the_launch():
    text = yaml.safe_dump({"name": "s", "base": _merge(PLANNABLE, {"distill": {
        "teachers": ["teacher-0123abcd"], "synthetic_weight": 0.5, "synthetic_tokens": 4096}})})
    assert parse_spec(text).base.distill.teachers == ("teacher-0123abcd",)


def _numeric_keys() -> list[str]:
    """Every dotted key of RunConfig holding numbers: int/float, Optional, or tuples of them."""
    out = []
    for key in keys.leaf_keys():
        tp = keys.key_type(key)
        args = [a for a in getattr(tp, "__args__", ()) if a is not type(None) and a is not Ellipsis]
        if keys.is_numeric(key) or int in args or (args and set(args) <= {int, float}):
            out.append(key)
    return out


def test_every_numeric_field_declares_a_range_its_default_satisfies():
    numeric = _numeric_keys()
    assert len(numeric) > 35 and "optim.betas" in numeric and "train.micro_batch_size" in numeric
    undeclared = [k for k in numeric if keys.key_range(k) is None]
    assert not undeclared, undeclared
    default = RunConfig()
    for key in numeric:
        value = keys.get_value(default, key)
        assert strict.check_range(keys.key_range(key), value, file=None, path=key) == value


@pytest.mark.parametrize("key", _numeric_keys())
def test_each_range_refuses_the_value_just_outside_it(key):
    rng = keys.key_range(key)
    step = 1 if keys.is_int(key) else 1e-9
    outside = rng.low - (step if not rng.low_open else 0) if rng.low is not None else None
    if outside is None:
        outside = rng.high + (step if not rng.high_open else 0)
    default = keys.get_value(RunConfig(), key)
    if isinstance(default, tuple):
        outside = [outside] * len(default)
    pattern = rf"^override '{key}=.*': {key}(\[0\])?: .* is out of range"
    with pytest.raises(UserError, match=pattern):
        load_run_config(None, [f"{key}={outside}"])


def test_bounded_refuses_a_default_outside_its_own_range():
    with pytest.raises(TypeError, match="not >= 1"):
        strict.bounded(0, ge=1)
    field = strict.bounded(0.9, ge=0, lt=1)
    assert str(field.metadata[strict.RANGE]) == "in [0, 1)"
    assert isinstance(field, dataclasses.Field) and field.default == 0.9
