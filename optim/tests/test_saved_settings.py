"""Settings that change the result are saved, shown and checked on resume.

``state_dict()["settings"]`` holds every result-changing setting that is no param-group key
(plain str/int/bool values, so ``torch.load(weights_only=True)`` reads it); ``repr`` shows
them; ``load_state_dict`` refuses, in one line naming the setting and both values, a state_dict
saved with different settings (e.g. a resume that turns stochastic rounding off), and loads one
without settings (an older optim's) with a UserWarning.
"""

from __future__ import annotations

import re
import warnings

import pytest
import torch
from torch import nn

import optim

SETTINGS = {
    optim.AdamW: {"stochastic_rounding": False, "master_weights": False, "seed": 0, "foreach": True},
    optim.Muon: {"ns_dtype": "bfloat16", "ns_backend": "auto", "stochastic_rounding": False, "seed": 0,
                 "distributed_mode": "none", "foreach": True},
    optim.Scion: {"stochastic_rounding": False, "seed": 0, "distributed_mode": "auto"},
}  # fmt: skip
"""Each optimizer's settings with the default arguments."""

CHANGED = [
    (optim.AdamW, "stochastic_rounding", True, True),
    (optim.AdamW, "master_weights", True, True),
    (optim.AdamW, "seed", 7, 7),
    (optim.AdamW, "foreach", False, False),
    (optim.Muon, "stochastic_rounding", True, True),
    (optim.Muon, "seed", 7, 7),
    (optim.Muon, "ns_dtype", torch.float32, "float32"),
    (optim.Muon, "ns_backend", "torch_sym", "torch_sym"),
    (optim.Muon, "foreach", False, False),
    (optim.Muon, "distributed_mode", "ddp", "ddp"),
    (optim.Scion, "stochastic_rounding", True, True),
    (optim.Scion, "seed", 7, 7),
    (optim.Scion, "distributed_mode", "none", "none"),
]
"""(optimizer, argument, a non-default value, how the state_dict stores it)."""


def _stepped(cls, **kwargs) -> torch.optim.Optimizer:
    p = nn.Parameter(torch.randn(4, 4, generator=torch.Generator().manual_seed(0)))
    opt = cls([p], **kwargs)
    p.grad = torch.ones(4, 4)
    opt.step()
    return opt


@pytest.mark.parametrize("cls", list(SETTINGS), ids=lambda c: c.__name__)
def test_state_dict_carries_settings_as_plain_values(cls, tmp_path):
    sd = _stepped(cls).state_dict()
    assert sd["settings"] == SETTINGS[cls]
    assert all(isinstance(v, (str, int, float, bool, type(None))) for v in sd["settings"].values())
    torch.save(sd, tmp_path / "opt.pt")
    assert torch.load(tmp_path / "opt.pt", weights_only=True)["settings"] == SETTINGS[cls]


@pytest.mark.parametrize(("cls", "name", "value", "stored"), CHANGED, ids=[f"{c.__name__}-{n}" for c, n, *_ in CHANGED])
def test_repr_shows_each_setting(cls, name, value, stored):
    text = repr(cls([nn.Parameter(torch.zeros(4, 4))], **{name: value}))
    assert f"    {name}: {stored}\n" in text


ENFORCED = [c for c in CHANGED if c[1] != "distributed_mode"]
TOPOLOGY = [c for c in CHANGED if c[1] == "distributed_mode"]


@pytest.mark.parametrize(("cls", "name", "value", "stored"), TOPOLOGY, ids=[c.__name__ for c, *_ in TOPOLOGY])
def test_a_resume_may_change_the_distributed_mode(cls, name, value, stored):
    """distributed_mode is recorded but not enforced (``_validate.TOPOLOGY_SETTINGS``): a run
    may resume on another world size or parallelism, which DCP reshards."""
    from optim._validate import TOPOLOGY_SETTINGS

    assert name in TOPOLOGY_SETTINGS
    saved = _stepped(cls, **{name: value}).state_dict()
    assert saved["settings"][name] == stored
    fresh = cls([nn.Parameter(torch.zeros(4, 4))])
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        fresh.load_state_dict(saved)
    assert len(fresh.state) == 1


@pytest.mark.parametrize(("cls", "name", "value", "stored"), ENFORCED,
                         ids=[f"{c.__name__}-{n}" for c, n, *_ in ENFORCED])
def test_load_refuses_a_state_dict_saved_with_another_setting(cls, name, value, stored):
    saved = _stepped(cls, **{name: value}).state_dict()
    assert saved["settings"][name] == stored
    fresh = cls([nn.Parameter(torch.zeros(4, 4))])
    default = SETTINGS[cls][name]
    message = (f"{cls.__name__}.load_state_dict: setting {name!r} was {stored!r} when saved, "
               f"this optimizer has {default!r}")
    with pytest.raises(ValueError, match=re.escape(message)):
        fresh.load_state_dict(saved)
    same = cls([nn.Parameter(torch.zeros(4, 4))], **{name: value})
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        same.load_state_dict(saved)  # the same settings load silently


@pytest.mark.parametrize("cls", list(SETTINGS), ids=lambda c: c.__name__)
def test_state_dict_without_settings_loads_with_a_warning(cls):
    """Saved before settings were recorded (or rebuilt by torch.distributed.checkpoint, which
    keeps only "state" and "param_groups"): loaded, but the user is told nothing was checked."""
    old = dict(_stepped(cls).state_dict())
    del old["settings"]
    fresh = cls([nn.Parameter(torch.zeros(4, 4))])
    with pytest.warns(UserWarning, match="records no settings"):
        fresh.load_state_dict(old)
    assert len(fresh.state) == 1
