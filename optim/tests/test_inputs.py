"""Inputs that torch refuses are refused here too, at the earliest point and in one clear line.

- complex params: ``optim.AdamW`` steps them bitwise as ``torch.optim.AdamW`` (real and imaginary
  parts through ``torch.view_as_real``); Muon groups and Scion refuse them, as
  ``torch.optim.Muon`` does (torch raises at the step; we raise at construction);
- sparse gradients: torch's RuntimeError "... does not support sparse gradients";
- every constructor argument and group key: a ValueError naming the argument, the value and
  what is allowed, with a did-you-mean for names;
- ``ns_backend="triton"`` without triton: refused at construction;
- a foreign (``torch.optim.Muon``) state_dict: refused by ``load_state_dict``, naming what lacks.

Also what the user installs: the ``[triton]`` extra carries numpy (``TRITON_INTERPRET=1``
imports it), the package docs cite no file outside the wheel without saying it lives in the
scalelab repository, and ``muon_param_groups`` gives its AdamW group AdamW's own hyperparameters.
"""

from __future__ import annotations

import re
import tomllib
from pathlib import Path

import pytest
import torch
from torch import nn

import optim
import optim._validate

OPTIM_DIR = Path(__file__).resolve().parents[1]


def _mat(*shape: int, dtype: torch.dtype = torch.float32, seed: int = 0) -> torch.Tensor:
    """Standard normal entries (complex dtypes: nonzero real and imaginary parts)."""
    gen = torch.Generator().manual_seed(seed)
    draw = dtype if dtype.is_complex else torch.float32
    return torch.randn(*shape, generator=gen, dtype=draw).to(dtype)


# complex params ---------------------------------------------------------------------------

@pytest.mark.parametrize("foreach", [False, True])
def test_adamw_complex_params_bitwise_torch(foreach):
    gen = torch.Generator().manual_seed(0)
    w = [torch.randn(6, 5, dtype=torch.complex64, generator=gen), torch.randn(7, generator=gen)]
    ours = [nn.Parameter(x.clone()) for x in w]
    ref = [nn.Parameter(x.clone()) for x in w]
    opt = optim.AdamW(ours, lr=1e-2, weight_decay=0.1, foreach=foreach)
    opt_ref = torch.optim.AdamW(ref, lr=1e-2, weight_decay=0.1, foreach=False)
    for _ in range(4):
        g = [torch.randn(x.shape, dtype=x.dtype, generator=gen) for x in w]
        for p, q, gi in zip(ours, ref, g):
            p.grad, q.grad = gi.clone(), gi.clone()
        opt.step()
        opt_ref.step()
        for p, q in zip(ours, ref):
            assert torch.equal(p, q)
    assert ours[0].imag.abs().sum() > 0


def test_muon_adamw_groups_step_complex_params_like_adamw():
    c = nn.Parameter(_mat(4, 3, dtype=torch.complex64))
    ref = nn.Parameter(c.detach().clone())
    opt = optim.Muon([{"params": [c], "use_muon": False, "lr": 1e-2, "eps": 1e-8, "betas": (0.9, 0.999),
                       "weight_decay": 0.0}])
    opt_ref = torch.optim.AdamW([ref], lr=1e-2, weight_decay=0.0, foreach=False)
    c.grad = ref.grad = _mat(4, 3, dtype=torch.complex64, seed=1)
    opt.step()
    opt_ref.step()
    assert torch.equal(c, ref) and c.imag.abs().sum() > 0


def test_muon_and_scion_refuse_complex_params():
    p = nn.Parameter(_mat(4, 4, dtype=torch.complex64))
    with pytest.raises(ValueError, match="Muon: complex parameters are not supported"):
        optim.Muon([p])
    with pytest.raises(ValueError, match="Scion: complex parameters are not supported"):
        optim.Scion([p])


# sparse gradients ---------------------------------------------------------------------------

def _sparse_grad(p: torch.Tensor) -> torch.Tensor:
    return torch.ones_like(p).to_sparse()


@pytest.mark.parametrize(
    ("owner", "make"),
    [
        ("AdamW", lambda p: optim.AdamW([p])),
        ("Muon", lambda p: optim.Muon([p])),
        ("Muon", lambda p: optim.Muon([{"params": [p], "use_muon": False}])),
        ("Scion", lambda p: optim.Scion([p])),
    ],
    ids=["adamw", "muon", "muon-adamw-group", "scion"],
)
def test_sparse_gradients_raise_torch_style(owner, make):
    p = nn.Parameter(_mat(4, 4))
    opt = make(p)
    p.grad = _sparse_grad(p)
    w0 = p.detach().clone()
    with pytest.raises(RuntimeError, match=f"^{owner} does not support sparse gradients$"):
        opt.step()
    assert torch.equal(p.detach(), w0) and len(opt.state) == 0


# constructor arguments ------------------------------------------------------------------------

BAD = [
    (optim.Muon, {"momentum": 1.5}, "Muon: momentum must be in [0, 1), got 1.5"),
    (optim.Muon, {"ns_steps": 0}, "Muon: ns_steps must be an int >= 1, got 0"),
    (optim.Muon, {"ns_steps": 2.0}, "Muon: ns_steps must be an int >= 1, got 2.0"),
    (optim.Muon, {"coefficients": "nope"}, "Muon: coefficients='nope' refused"),
    (optim.Muon, {"coefficients": "jordn"}, "did you mean 'jordan'?"),
    (optim.Muon, {"shape_scale": "spectrl"}, "Muon: shape_scale must be one of ('jordan', 'spectral', "
                                             "'moonlight'), got 'spectrl'; did you mean 'spectral'?"),
    (optim.Muon, {"lr": -0.1}, "Muon: lr must be >= 0, got -0.1"),
    (optim.Muon, {"weight_decay": -1.0}, "Muon: weight_decay must be >= 0, got -1.0"),
    (optim.Muon, {"nesterov": "yes"}, "Muon: nesterov must be True or False, got 'yes'"),
    (optim.Muon, {"betas": (0.9, 1.0)}, "Muon: betas[1] must be in [0, 1), got 1.0"),
    (optim.Muon, {"eps": -1e-8}, "Muon: eps must be >= 0, got -1e-08"),
    (optim.Muon, {"ns_dtype": torch.int32}, "Muon: ns_dtype must be a floating torch.dtype"),
    (optim.Muon, {"ns_backend": "trition"}, "did you mean 'triton'?"),
    (optim.Muon, {"distributed_mode": "dpp"}, "Muon: distributed_mode must be one of ('auto', 'none', "
                                              "'ddp', 'fsdp'), got 'dpp'; did you mean 'ddp'?"),
    (optim.Muon, {"seed": -1}, "Muon: seed must be an int >= 0, got -1"),
    (optim.Muon, {"stochastic_rounding": 1}, "Muon: stochastic_rounding must be True or False, got 1"),
    (optim.Muon, {"foreach": "no"}, "Muon: foreach must be True or False, got 'no'"),
    (optim.AdamW, {"lr": -1.0}, "AdamW: lr must be >= 0, got -1.0"),
    (optim.AdamW, {"betas": (1.0, 0.9)}, "AdamW: betas[0] must be in [0, 1), got 1.0"),
    (optim.AdamW, {"betas": (0.9,)}, "AdamW: betas must be a pair"),
    (optim.AdamW, {"eps": -1.0}, "AdamW: eps must be >= 0, got -1.0"),
    (optim.AdamW, {"weight_decay": float("nan")}, "AdamW: weight_decay must be >= 0, got nan"),
    (optim.AdamW, {"seed": "0"}, "AdamW: seed must be an int >= 0, got '0'"),
    (optim.AdamW, {"master_weights": "yes"}, "AdamW: master_weights must be True or False, got 'yes'"),
    (optim.Scion, {"momentum": 1.0}, "Scion: momentum (= 1 - alpha) must be in [0, 1), got 1.0"),
    (optim.Scion, {"scale": -1.0}, "Scion: scale must be >= 0, got -1.0"),
    (optim.Scion, {"constrained": "no"}, "Scion: constrained must be True or False, got 'no'"),
    (optim.Scion, {"distributed_mode": "fdsp"}, "did you mean 'fsdp'?"),
    (optim.Scion, {"seed": 1.5}, "Scion: seed must be an int >= 0, got 1.5"),
]


@pytest.mark.parametrize(("cls", "kwargs", "message"), BAD, ids=[f"{c.__name__}-{next(iter(k))}" for c, k, _ in BAD])
def test_bad_constructor_argument_is_refused_with_its_name_and_value(cls, kwargs, message):
    with pytest.raises(ValueError, match=re.escape(message)):
        cls([nn.Parameter(_mat(4, 4))], **kwargs)


def test_bad_group_key_is_refused_at_construction():
    p = nn.Parameter(_mat(4, 4))
    with pytest.raises(ValueError, match=re.escape("Muon: momentum must be in [0, 1), got 1.5")):
        optim.Muon([{"params": [p], "momentum": 1.5}])
    with pytest.raises(ValueError, match=re.escape("Muon: lr must be >= 0, got -1.0")):
        optim.Muon([{"params": [p], "use_muon": False, "lr": -1.0}])
    opt = optim.AdamW([p])
    with pytest.raises(ValueError, match=re.escape("AdamW: eps must be >= 0, got -1.0")):
        opt.add_param_group({"params": [nn.Parameter(_mat(2, 2))], "eps": -1.0})


def test_triton_backend_without_triton_is_refused_at_construction(monkeypatch):
    monkeypatch.setattr(optim._validate, "triton_available", lambda: False)
    with pytest.raises(ValueError, match=r"^Muon: ns_backend='triton' needs the triton package"):
        optim.Muon([nn.Parameter(_mat(4, 4))], ns_backend="triton")
    monkeypatch.setattr(optim._validate, "triton_available", lambda: True)
    optim.Muon([nn.Parameter(_mat(4, 4))], ns_backend="triton")  # the check is what refused


# foreign state_dicts -------------------------------------------------------------------------

def test_torch_muon_state_dict_is_refused_by_optim_muon():
    p = nn.Parameter(_mat(4, 4))
    theirs = torch.optim.Muon([p])
    p.grad = _mat(4, 4, seed=1)
    theirs.step()
    ours = optim.Muon([nn.Parameter(_mat(4, 4))])
    with pytest.raises(ValueError, match=r"Muon.load_state_dict: param group 0 lacks \[.*'use_muon'\]"):
        ours.load_state_dict(theirs.state_dict())


# what the user installs ----------------------------------------------------------------------

def test_triton_extra_carries_numpy_for_the_interpreter():
    meta = tomllib.loads((OPTIM_DIR / "pyproject.toml").read_text())
    extra = meta["project"]["optional-dependencies"]["triton"]
    assert any(re.match(r"numpy\b", req) for req in extra), extra


REPO_PATH = re.compile(r"(?<![\w/.])((?:optim/)?(?:tests|bench|docs|sweeps|scripts|analysis|scalelab)/[\w/.]+)")


def _doc_texts() -> dict[str, str]:
    """The README and the docstrings/comments of every module in the wheel (optim/*.py)."""
    texts = {"README.md": (OPTIM_DIR / "README.md").read_text()}
    for path in sorted(OPTIM_DIR.glob("*.py")):
        texts[path.name] = path.read_text()
    return texts


OWNED = {"README.md"} | {p.name for p in OPTIM_DIR.glob("*.py")}
"""The README and every module of the wheel."""


@pytest.mark.parametrize("name", sorted(OWNED))
def test_docs_cite_files_outside_the_wheel_as_the_scalelab_repositorys(name):
    """A path outside optim/'s modules (tests, bench, docs, ...) is not in the wheel: the text
    around it must say "scalelab repository", or the citation is a dead end for a pip user."""
    text = _doc_texts()[name]
    bad = []
    for m in REPO_PATH.finditer(text):
        window = " ".join(text[max(0, m.start() - 200) : m.end() + 200].split())
        if "scalelab repository" not in window:
            bad.append(m.group(1))
    assert not bad, f"{name} cites {bad} without saying they are in the scalelab repository"


def test_muon_param_groups_give_adamw_groups_their_own_hyperparameters():
    model = nn.Sequential(nn.Embedding(8, 4), nn.Linear(4, 4), nn.Linear(4, 8))
    groups = optim.muon_param_groups(model, head_names=["2"])
    aux = [g for g in groups if not g["use_muon"]]
    assert aux and all(g["lr"] == 3e-4 and g["eps"] == 1e-10 and g["betas"] == (0.9, 0.95)
                       and g["weight_decay"] == 0.0 for g in aux)
    opt = optim.Muon(groups, lr=0.02)
    assert all(g["lr"] == 3e-4 for g in opt.param_groups if not g["use_muon"])  # not Muon's 0.02
    custom = optim.muon_param_groups(model, head_names=["2"], adamw={"lr": 1e-3})
    assert all(g["lr"] == 1e-3 and g["eps"] == 1e-10 for g in custom if not g["use_muon"])
