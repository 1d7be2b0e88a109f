"""``copy.deepcopy`` and pickle of each optimizer keep its settings: the copy's steps equal
the original's bit for bit. (torch's ``Optimizer.__getstate__`` keeps only defaults, state and
param_groups; the settings these optimizers hold as attributes were lost, and the copy's next
step raised AttributeError: ``optim/_settings_state.py``.)"""

import copy
import io
import os
import pickle
import tempfile

import pytest
import torch
import torch.distributed as dist
from _ranks import run_ranks

import optim

MAKERS = {
    "muon": lambda ps: optim.Muon(ps, lr=0.02, weight_decay=0.1, foreach=False, seed=3),
    "muon-sr": lambda ps: optim.Muon(ps, lr=0.02, stochastic_rounding=True, seed=3),
    "adamw-sr": lambda ps: optim.AdamW(ps, lr=1e-2, stochastic_rounding=True, seed=4),
    "adamw-bf16-moments": lambda ps: optim.AdamW(ps, lr=1e-2, stochastic_rounding=True, seed=4,
                                                 moment_dtype=torch.bfloat16),
    "scion-sr": lambda ps: optim.Scion(ps, norm="Spectral", lr=0.01, stochastic_rounding=True, seed=5),
}
SR = {"muon-sr", "adamw-sr", "adamw-bf16-moments", "scion-sr"}


def _pickled(opt):
    buf = io.BytesIO()
    pickle.dump(opt, buf)
    return pickle.loads(buf.getvalue())


@pytest.mark.parametrize("how", ["deepcopy", "pickle"])
@pytest.mark.parametrize("name", list(MAKERS))
def test_a_copy_steps_like_the_original(name, how):
    gen = torch.Generator().manual_seed(0)
    dtype = torch.bfloat16 if name in SR else torch.float32
    p = torch.nn.Parameter(torch.randn(24, 16, generator=gen).to(dtype))
    grads = [torch.randn(24, 16, generator=gen).to(dtype) for _ in range(4)]
    opt = MAKERS[name]([p])
    p.grad = grads[0]
    opt.step()
    twin = copy.deepcopy(opt) if how == "deepcopy" else _pickled(opt)
    q = twin.param_groups[0]["params"][0]
    assert q is not p and torch.equal(q, p)
    for g in grads[1:]:
        p.grad, q.grad = g.clone(), g.clone()
        opt.step()
        twin.step()
    assert torch.equal(q, p)
    assert {k: getattr(twin, k) for k in opt._SETTINGS} == {k: getattr(opt, k) for k in opt._SETTINGS}


def _copy_worker(rank: int, world: int, init_file: str, out: str) -> None:
    dist.init_process_group("gloo", init_method=f"file://{init_file}", rank=rank, world_size=world)
    group = dist.new_group(list(range(world)))
    res = {}
    makers = {"muon": lambda ps: optim.Muon(ps, lr=0.02, process_group=group, distributed_mode="ddp"),
              "scion": lambda ps: optim.Scion(ps, norm="Spectral", lr=0.01, process_group=group)}
    for name, make in makers.items():
        gen = torch.Generator().manual_seed(0)  # the same params and grads on every rank
        p = torch.nn.Parameter(torch.randn(24, 16, generator=gen))
        grads = [torch.randn(24, 16, generator=gen) for _ in range(3)]
        opt = make([p])
        p.grad = grads[0]
        opt.step()
        twin = copy.deepcopy(opt)
        q = twin.param_groups[0]["params"][0]
        for g in grads[1:]:
            p.grad, q.grad = g.clone(), g.clone()
            opt.step()
            twin.step()
        res[name] = (twin.process_group is group, q is not p, torch.equal(q, p))
    torch.save(res, f"{out}.{rank}")
    dist.destroy_process_group()


@pytest.mark.xdist_group("dist")
def test_a_deep_copy_shares_the_process_group():
    """A deep copy of an optimizer bound to an explicit process group takes the same group
    (a communicator neither copies nor pickles), and steps like the original on 2 gloo ranks."""
    with tempfile.TemporaryDirectory() as tmp:
        init_file, out = os.path.join(tmp, "init"), os.path.join(tmp, "res")
        run_ranks(_copy_worker, (2, init_file, out))
        ranks = [torch.load(f"{out}.{r}", weights_only=False) for r in range(2)]
    for res in ranks:
        assert res == {"muon": (True, True, True), "scion": (True, True, True)}, res
