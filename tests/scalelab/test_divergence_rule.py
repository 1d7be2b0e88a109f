"""The default divergence rule: a train loss above divergence_factor x
ln(vocab) for divergence_patience steps is DIVERGED, not only a NaN. The pure rule, the
config fields (and that they keep old run ids), and lr 1000 without clipping through the
real CLI."""

from __future__ import annotations

import math
import subprocess
import sys

import polars as pl
import pytest
from _train_util import cli_env, make_token_dir, tiny_cfg, write_cfg_yaml
from _waits import CEILING_S

from scalelab.config import RunConfig, load_run_config
from scalelab.errors import EXIT_DIVERGED, UserError
from scalelab.identity import identity_dict, run_id
from scalelab.store.status import State, read_status
from scalelab.train import train
from scalelab.train.divergence import DivergenceMonitor, DivergenceRule

LN256 = math.log(256)
BLOW_UP = ("optim.lr=1000", "train.grad_clip=null", "optim.weight_decay=0")
"""Measured on this tiny config: loss 5.55, 2.6e6, 5.6e6, 5.6e6, then exactly ln 256 to
the end: COMPLETED under the old rule (non-finite only)."""


def _rule(**kw) -> DivergenceRule:
    args = {"vocab_size": 256, "factor": 10.0, "patience": 1, "ceiling": None} | kw
    return DivergenceRule.of(**args)


def _first_trip(rule: DivergenceRule, losses: list[float]) -> tuple[int, str] | None:
    monitor = DivergenceMonitor(rule)
    for step, loss in enumerate(losses, start=1):
        if why := monitor.update(step, loss):
            return step, why
    return None


def test_factor_times_ln_vocab_names_the_rule():
    assert _rule().threshold == pytest.approx(10 * LN256)
    step, why = _first_trip(_rule(), [5.55, 4.0, 3.0, 4.4e5, 5.545])
    assert step == 4
    assert why == ("train loss 440000 above 10 x initial loss 5.545 (ln vocab 256) for 1 "
                   "consecutive step at step 4")


def test_patience_counts_consecutive_steps_only():
    spiky = [5.5, 60.0, 3.0, 60.0, 60.0, 3.0, 60.0, 60.0, 60.0]
    assert _first_trip(_rule(patience=3), spiky)[0] == 9  # streaks of 1 and 2 reset
    assert _first_trip(_rule(patience=2), spiky)[0] == 5
    assert "for 3 consecutive steps at step 9" in _first_trip(_rule(patience=3), spiky)[1]


def test_non_finite_diverges_at_once_whatever_the_rule():
    for rule in (_rule(patience=5), _rule(factor=None), _rule(ceiling=1e9)):
        assert _first_trip(rule, [5.5, math.inf]) == (2, "train loss inf non-finite at step 2")
        assert _first_trip(rule, [math.nan])[1] == "train loss nan non-finite at step 1"


def test_ceiling_overrides_factor_and_none_disables():
    ceiling = _rule(ceiling=1000.0)  # looser than 10 x ln 256: the explicit value wins
    assert ceiling.threshold == 1000.0 and _first_trip(ceiling, [500.0]) is None
    assert "above 1000.0 (train.loss_ceiling)" in _first_trip(ceiling, [500.0, 1001.0])[1]
    assert _first_trip(_rule(ceiling=4.0), [4.5])[0] == 1  # tighter works too
    assert _rule(factor=None).threshold is None
    assert _first_trip(_rule(factor=None), [1e30] * 10) is None


def test_healthy_early_spike_is_not_divergence():
    """AdamW at lr 1 without clipping (measured): 5.3 -> 23 nats by step 9, then trains
    to 3.4. Peak 4.1x the initial loss: below the default factor."""
    spike = [5.55, 5.26, 6.12, 11.7, 11.4, 13.0, 18.7, 14.2, 23.0, 17.3, 21.6, 18.0, 12.5, 5.8, 3.4]
    assert _first_trip(_rule(), spike) is None


def test_config_fields_validate_and_keep_old_run_ids():
    cfg = RunConfig()
    assert (cfg.train.divergence_factor, cfg.train.divergence_patience) == (10.0, 1)
    # at their defaults the new fields stay out of the identity: ids of old runs are kept
    assert "divergence_factor" not in identity_dict(cfg)["train"]
    assert "divergence_patience" not in identity_dict(cfg)["train"]
    assert run_id(load_run_config(None, ["train.divergence_factor=10"])) == run_id(cfg)
    others = {run_id(load_run_config(None, [o])) for o in (
        "train.divergence_factor=null", "train.divergence_factor=20", "train.divergence_patience=3")}
    assert len(others) == 3 and run_id(cfg) not in others
    for bad in ("train.divergence_factor=1.0", "train.divergence_factor=-5",
                "train.divergence_patience=0"):
        with pytest.raises(UserError, match="divergence_"):
            load_run_config(None, [bad])


@pytest.fixture(scope="module")
def data(tmp_path_factory):
    return make_token_dir(tmp_path_factory.mktemp("tok") / "tokens")


def test_lr_1000_without_clipping_diverges_through_the_cli(data, tmp_path):
    cfg_yaml = write_cfg_yaml(tmp_path / "c.yaml", tiny_cfg(data, 30, *BLOW_UP))
    run_dir = tmp_path / "blowup"
    proc = subprocess.run(
        [sys.executable, "-m", "scalelab", "train", str(cfg_yaml), "--run-dir", str(run_dir)],
        env=cli_env(), capture_output=True, text=True, timeout=CEILING_S, check=False,
    )
    assert proc.returncode == EXIT_DIVERGED, proc.stdout + proc.stderr
    assert "Traceback" not in proc.stdout + proc.stderr
    status = read_status(run_dir)
    assert status["state"] == "DIVERGED" and status["steps_done"] == 2
    assert "above 10 x initial loss 5.545 (ln vocab 256) for 1 consecutive step at step 2" \
        in status["error"]
    assert status["error"] in proc.stdout  # the run's log says it too


def test_without_the_rule_the_same_run_completes_having_learned_nothing(data, tmp_path):
    """What the rule is for: switched off, the blow-up above ends COMPLETED at ln 256."""
    run_dir = tmp_path / "off"
    assert train(tiny_cfg(data, 30, *BLOW_UP, "train.divergence_factor=null"), run_dir) \
        == State.COMPLETED
    evals = pl.read_parquet(run_dir / "evals.parquet")
    assert evals["loss"][-1] == pytest.approx(LN256, abs=1e-3)


def test_healthy_tiny_runs_are_not_flagged(data, tmp_path):
    for extra in ((), ("optim.lr=0.1", "train.warmup=0", "train.grad_clip=null"),
                  ("optim.name=muon", "optim.lr=0.05", "train.warmup=0")):
        run_dir = tmp_path / ("run" + "_".join(extra))
        assert train(tiny_cfg(data, 40, *extra), run_dir) == State.COMPLETED, extra
        assert read_status(run_dir)["error"] is None
