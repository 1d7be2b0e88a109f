"""A sharded (DCP) checkpoint carries the optimizer's result-changing settings
(``scalelab.train.checkpoint.dcp``): ``get_state_dict`` keeps only the state and the param
groups, so without the ``optimizer_settings`` item a resume with another setting would load
silently. One process, no process group (DCP reads and writes without one)."""

from __future__ import annotations

import warnings

import pytest
import torch
from torch import nn

import optim
from scalelab.train.checkpoint import dcp


def _model_and_opt(**kwargs):
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(8, 8, bias=False), nn.Linear(8, 4, bias=False))
    opt = optim.AdamW(model.parameters(), lr=1e-2, **kwargs)
    model(torch.randn(3, 8)).sum().backward()
    opt.step()
    return model, opt


def test_the_same_settings_resume_silently_and_exactly(tmp_path):
    model, opt = _model_and_opt(seed=3)
    dcp.save(tmp_path / "ckpt", model, opt)
    fresh_model, fresh = _model_and_opt(seed=3)
    with torch.no_grad():
        for p in fresh_model.parameters():
            p.zero_()
    with warnings.catch_warnings():
        warnings.simplefilter("error", UserWarning)
        dcp.load(tmp_path / "ckpt", fresh_model, fresh)
    for a, b in zip(model.parameters(), fresh_model.parameters()):
        assert torch.equal(a, b)
    sa, sb = opt.state_dict()["state"], fresh.state_dict()["state"]
    assert all(torch.equal(sa[i][k], sb[i][k]) for i in sa for k in sa[i])


def test_another_setting_is_refused_in_one_line(tmp_path):
    model, opt = _model_and_opt(seed=3)
    dcp.save(tmp_path / "ckpt", model, opt)
    fresh_model, fresh = _model_and_opt(seed=4)
    with pytest.raises(ValueError, match=r"setting 'seed' was 3 when saved, this optimizer has 4"):
        dcp.load(tmp_path / "ckpt", fresh_model, fresh)


def test_a_refused_resume_leaves_the_model_untouched(tmp_path):
    """The settings are checked before any tensor is read into the live model."""
    model, opt = _model_and_opt(seed=3)
    dcp.save(tmp_path / "ckpt", model, opt)
    fresh_model, fresh = _model_and_opt(seed=4)
    with torch.no_grad():  # unlike the saved weights, so a load would show
        for p in fresh_model.parameters():
            p.zero_()
    before = [p.detach().clone() for p in fresh_model.parameters()]
    with pytest.raises(ValueError, match="setting 'seed'"):
        dcp.load(tmp_path / "ckpt", fresh_model, fresh)
    assert all(torch.equal(a, b) for a, b in zip(before, fresh_model.parameters()))
