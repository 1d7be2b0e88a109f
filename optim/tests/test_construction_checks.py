"""Checks at construction, not at the first step or never.

- Scion: each norm's rank rule per param (``LMO.shape_problem``), at construction and in
  ``add_param_group``: before, ``Scion([vector], norm="Spectral")`` constructed and its first
  ``step()`` raised ``IndexError``; ColNorm, RowNorm and Sign did the same on a 0-D param.
- Every optimizer: an unknown group key is refused with a did-you-mean (before, a misspelled
  ``"use_muonn": False`` was ignored and the param trained with Muon).
- ``muon_param_groups`` / ``scion_param_groups``: a 2-D param routed as hidden that looks like
  an output head or an embedding (name, or a dim equal to the vocabulary) gets one warning
  naming it and what to pass.
"""

import warnings

import pytest
import torch
from torch import nn

import optim


def _p(*shape):
    return nn.Parameter(torch.randn(shape))


@pytest.mark.parametrize(("norm", "shape"), [
    ("Spectral", (4,)), ("Spectral", ()), ("SpectralConv", (4,)),
    ("ColNorm", ()), ("ColNorm", (4,)), ("ColNorm", (2, 3, 4)),
    ("RowNorm", ()), ("RowNorm", (4,)), ("Sign", ()),
])
def test_scion_refuses_a_param_its_norm_cannot_take(norm, shape):
    message = rf"Scion: norm {norm} cannot take the param of shape {tuple(shape)!r}"
    with pytest.raises(ValueError, match=message.replace("(", r"\(").replace(")", r"\)")):
        optim.Scion([_p(*shape)], norm=norm)
    opt = optim.Scion([_p(4, 4)], norm=norm if norm != "Sign" else "Spectral")
    with pytest.raises(ValueError, match="cannot take"):
        opt.add_param_group({"params": [_p(*shape)], "norm": norm})


def test_scion_refuses_rows_that_do_not_split_into_blocks():
    with pytest.raises(ValueError, match="10 rows do not split into blocks=3"):
        optim.Scion([_p(10, 4)], norm=optim.lmo.Spectral(blocks=3))


@pytest.mark.parametrize(("norm", "shape"), [
    ("Spectral", (4, 3)), ("Spectral", (2, 4, 3)), ("SpectralConv", (4, 3, 3, 3)), ("ColNorm", (5, 3)),
    ("RowNorm", (5, 3)), ("Sign", (5,)), ("Sign", (5, 3)), ("BiasRMS", ()), ("BiasRMS", (5,)),
    ("Auto", ()), ("Auto", (5,)), ("Auto", (4, 3)), ("Auto", (4, 3, 3, 3)),
])
def test_every_shape_scion_accepts_steps(norm, shape):
    p = _p(*shape)
    opt = optim.Scion([p], norm=norm, lr=0.1)
    p.grad = torch.randn_like(p)
    opt.step()
    assert torch.isfinite(p).all()


@pytest.mark.parametrize(("make", "group", "message"), [
    (lambda g: optim.Muon(g), {"use_muonn": False},
     "Muon: unknown param group key 'use_muonn'; did you mean 'use_muon'?"),
    (lambda g: optim.Muon(g), {"block": 3}, "did you mean 'blocks'?"),
    (lambda g: optim.AdamW(g), {"weight_decy": 0.0},
     "AdamW: unknown param group key 'weight_decy'; did you mean 'weight_decay'?"),
    (lambda g: optim.Scion(g), {"scales": 2.0}, "Scion: unknown param group key 'scales'; did you mean 'scale'?"),
    (lambda g: optim.AdamW(g), {"foo": 1}, "AdamW: unknown param group key 'foo' \\(known:"),
])
def test_unknown_group_keys_are_refused_with_a_did_you_mean(make, group, message):
    with pytest.raises(ValueError, match=message):
        make([{"params": [_p(4, 4)], **group}])
    opt = make([_p(4, 4)])
    with pytest.raises(ValueError, match=message):
        opt.add_param_group({"params": [_p(4, 4)], **group})


def test_metadata_keys_that_change_nothing_are_accepted():
    groups = [{"params": [_p(4, 4)], "name": "hidden", "base_lr": 0.02, "initial_lr": 0.02}]
    optim.Muon(groups)
    optim.AdamW([{"params": [_p(4, 4)], "name": "all", "param_names": ["w"]}])


class _Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.tok = nn.Embedding(256, 32)  # not an EMBED_NAMES name: found by type
        self.mlp = nn.Linear(32, 32)
        self.proj_out = nn.Linear(32, 256)  # the output layer, named as no HEAD_NAMES


def _caught(fn):
    with warnings.catch_warnings(record=True) as seen:
        warnings.simplefilter("always")
        fn()
    return [str(w.message) for w in seen if issubclass(w.category, UserWarning)]


@pytest.mark.parametrize("builder", [optim.muon_param_groups, optim.scion_param_groups])
def test_a_head_routed_as_hidden_warns_once_with_its_name(builder):
    model = _Net()
    msgs = _caught(lambda: builder(model))
    assert len(msgs) == 1, msgs
    assert "proj_out.weight (256, 32)" in msgs[0] and "head_names=['proj_out']" in msgs[0]
    assert "mlp.weight" not in msgs[0]
    assert _caught(lambda: builder(model, head_names=["proj_out"])) == []


def test_a_vocabulary_sized_hidden_matrix_warns_without_a_telling_name():
    model = nn.Sequential(nn.Embedding(100, 16), nn.Linear(16, 16), nn.Linear(16, 100))
    msgs = _caught(lambda: optim.muon_param_groups(model))
    assert len(msgs) == 1 and "2.weight (100, 16)" in msgs[0] and "vocabulary (100)" in msgs[0], msgs
    assert _caught(lambda: optim.muon_param_groups(model, head_names=["2"])) == []
