"""The optimizer registry: names, errors, AdamW decay groups, and every registered
optimizer builds and trains a few steps on cpu-50k."""

from __future__ import annotations

import polars as pl
import pytest
import torch
from _train_util import make_token_dir, tiny_cfg

from scalelab.config import OptimConfig
from scalelab.errors import UserError
from scalelab.model import build_model
from scalelab.store.status import State
from scalelab.train import train
from scalelab.train.optimizers import REGISTRY, build_optimizer, register


@pytest.fixture(scope="module")
def data(tmp_path_factory):
    return make_token_dir(tmp_path_factory.mktemp("tok") / "tokens")


def _model():
    from scalelab.config import ModelConfig

    m = build_model(ModelConfig(preset="cpu-50k"), 256)
    m.init_weights(seed=0, std=0.02)
    return m


def test_registered_names():
    assert {"adamw", "sr-adamw", "muon", "scion"} <= set(REGISTRY)


def test_unknown_name_is_a_user_error():
    with pytest.raises(UserError, match=r"optim\.name.*did you mean 'muon'"):
        build_optimizer(_model(), OptimConfig(name="muom"))


def test_register_refuses_duplicates():
    with pytest.raises(ValueError, match="already registered"):
        register("adamw")(lambda m, c: None)


def test_adamw_decays_matrices_not_gains():
    model = _model()
    opt = build_optimizer(model, OptimConfig(name="adamw", lr=1e-3, weight_decay=0.3))
    assert isinstance(opt, torch.optim.AdamW)
    decayed = {id(p) for g in opt.param_groups if g["weight_decay"] == 0.3 for p in g["params"]}
    for name, p in model.named_parameters():
        assert (id(p) in decayed) == (p.ndim >= 2), name
    assert all(g["base_lr"] == 1e-3 for g in opt.param_groups)


def test_muon_routes_hidden_matrices_and_aux_lr():
    model = _model()
    opt = build_optimizer(model, OptimConfig(name="muon", lr=0.02, aux_lr=3e-3))
    names = {id(p): n for n, p in model.named_parameters()}
    for g in opt.param_groups:
        kinds = {names[id(p)].split(".")[-2] for p in g["params"]}
        if g["use_muon"]:
            assert g["base_lr"] == 0.02 and "tok_emb" not in kinds and "lm_head" not in kinds
        else:
            assert g["base_lr"] == 3e-3


@pytest.mark.parametrize("name,extra", [
    ("adamw", []),
    ("sr-adamw", ["train.precision=bf16-pure"]),
    ("muon", ["optim.lr=0.02", "optim.aux_lr=0.01"]),
    ("scion", ["optim.lr=0.01", "optim.momentum=0.9"]),
])
def test_each_optimizer_trains(data, tmp_path, name, extra):
    cfg = tiny_cfg(data, 6, f"optim.name={name}", "train.norms_every=3", *extra)
    assert train(cfg, tmp_path / name) == State.COMPLETED
    m = pl.read_parquet(tmp_path / name / "metrics.parquet")
    assert m["train_loss"].is_finite().all()
    e = pl.read_parquet(tmp_path / name / "evals.parquet")["loss"]
    assert e[-1] < e[0] - 0.2, f"{name}: eval loss {e.to_list()}"  # it learns in 6 steps


@pytest.mark.parametrize("name", ["sr-adamw", "muon", "scion"])
def test_stochastic_rounding_off_is_round_to_nearest_and_a_new_run_id(name):
    """optim.stochastic_rounding False (the RTN ablation of optim/README.md) reaches the
    optimizer; at its default (True) it stays out of the run id, so old ids hold."""
    from scalelab.config import RunConfig
    from scalelab.identity import identity_dict, run_id

    model = _model().to(torch.bfloat16)
    for flag in (True, False):
        opt = build_optimizer(model, OptimConfig(name=name, stochastic_rounding=flag))
        assert opt.stochastic_rounding is flag
    base = RunConfig(optim=OptimConfig(name=name))
    assert run_id(base) == run_id(RunConfig(optim=OptimConfig(name=name, stochastic_rounding=True)))
    assert run_id(base) != run_id(RunConfig(optim=OptimConfig(name=name, stochastic_rounding=False)))
    assert "stochastic_rounding" not in identity_dict(base)["optim"]
