"""``torch.compile(opt.step, fullgraph=True)`` under torch's LR schedulers, with a real backend.

Before, a float lr that LambdaLR changed every step failed the guard
``param_groups[0]['lr'] == ...`` and recompiled each step under aot_eager and Inductor
(``FailOnRecompileLimitHit`` at the 8th step; the "eager" backend of test_compile.py hid it).
Each group's lr is now a 0-d float64 tensor that the schedulers ``fill_`` in place, and the
numbers OneCycleLR assigns (``betas``, ``momentum``) reach the traced math as tensor
arithmetic (``optim._hyper``), so 20 steps build at most 2 graphs (the first step creates the
lazy state) for every optimizer and scheduler, and for a hand-written schedule that assigns
floats into the groups (``FloatWrites``), and the weights match the same schedule run eagerly.

Backend: aot_eager (Dynamo's capture and guards and AOTAutograd's functionalised graph, with
no code generation: Inductor on CPU needs a C++ compiler and ~1 min per case on 2 cores; the
Inductor numbers are in optim/README.md). Graphs are counted as Dynamo's
``counters["stats"]["unique_graphs"]``: a backend wrapper would also count the restart of the
first graph's analysis that Dynamo's tensorify pass can make (the same graph compiled again).

Weights are compared after ``CHECK_AT`` = 8 steps: the traced update fuses ops (fma) and, with
tensor betas, computes 1 - β^t by a batched pow, so weights differ from eager by rounding only:
``ATOL`` = 1e-5 on weights ~0.1-1 (seen: <= 2.4e-7), SR-AdamW's bf16 weights ``ATOL_BF16`` = 3e-2
(a last-bit difference can flip a stochastic rounding by one bf16 ulp). Not after 20: Scion's
Sign head is discontinuous, so once training drives a momentum entry to ~0 a rounding-level
difference flips its sign, a 2·γ·ρ/d_in = 0.16 change of that weight (seen at step 18 of one
OneCycleLR run, 5e-7 before it), in eager code as much as compiled.
Time: ~3-4 s per case on this project's 2-core CPU machine (SR-AdamW ~8 s).
"""

import pytest
import torch
import torch._dynamo
from torch import nn
from torch._dynamo.utils import counters
from torch.optim.lr_scheduler import CosineAnnealingLR, LambdaLR, OneCycleLR

import optim

pytestmark = pytest.mark.filterwarnings("ignore:Detected call of `lr_scheduler.step\\(\\)` before:UserWarning")

STEPS = 20
MAX_GRAPHS = 2
ATOL = 1e-5
ATOL_BF16 = 3e-2
CHECK_AT = 8

RECIPES = {  # name -> (param dtype, optimizer of a model): every optimizer, as optim/README.md builds it
    "adamw": (torch.float32, lambda m: optim.AdamW(m.parameters(), lr=1e-2)),
    "muon": (torch.float32, lambda m: optim.Muon(
        optim.muon_param_groups(m, head_names=["3"], adamw={"lr": 1e-2}), lr=0.02, ns_dtype=torch.float32)),
    "scion": (torch.float32, lambda m: optim.Scion(optim.scion_param_groups(m, head_names=["3"]), lr=2**-3)),
    "sr-adamw": (torch.bfloat16, lambda m: optim.AdamW(m.parameters(), lr=1e-2, stochastic_rounding=True)),
}
SCHEDULES = {
    "lambda": lambda opt: LambdaLR(opt, lambda t: 1 / (1 + t)),
    "cosine": lambda opt: CosineAnnealingLR(opt, T_max=STEPS),
    # cycles betas (AdamW, Muon) or momentum (Scion) too, by assigning floats into the groups
    "onecycle": lambda opt: OneCycleLR(opt, max_lr=[float(g["lr"]) for g in opt.param_groups],
                                       total_steps=2 * STEPS),
}


class FloatWrites:
    """A hand-written schedule that assigns Python floats (``group["lr"] = x``), replacing the
    0-d tensor: Dynamo makes the float a graph input after its first change."""

    def __init__(self, opt):
        self.opt, self.t = opt, 0

    def step(self):
        self.t += 1
        for g in self.opt.param_groups:
            g["lr"] = 1e-2 / (1 + self.t)


SCHEDULES["float-writes"] = FloatWrites
CASES = [(r, s) for r in ("adamw", "muon", "scion") for s in SCHEDULES if s != "float-writes"] + [
    ("sr-adamw", "onecycle"), ("adamw", "float-writes")]


def _train(recipe: str, schedule: str, compiled: bool):
    dtype, make = RECIPES[recipe]
    torch.manual_seed(0)
    model = nn.Sequential(nn.Embedding(32, 16), nn.Linear(16, 16), nn.GELU(), nn.Linear(16, 32)).to(dtype)
    opt = make(model)
    step = torch.compile(opt.step, backend="aot_eager", fullgraph=True) if compiled else opt.step
    sched = SCHEDULES[schedule](opt)
    x = torch.randint(0, 32, (8, 9), generator=torch.Generator().manual_seed(0))
    weights = None
    for i in range(STEPS):
        nn.functional.cross_entropy(model(x[:, :-1]).float().flatten(0, 1), x[:, 1:].flatten()).backward()
        step()
        sched.step()  # (torch warns that opt.step ran "after" it: the compiled step bypasses its counter)
        opt.zero_grad()
        if i + 1 == CHECK_AT:
            weights = [p.detach().float().clone() for p in model.parameters()]
    return weights, opt


@pytest.mark.parametrize(("recipe", "schedule"), CASES)
def test_compiled_step_under_a_schedule_builds_at_most_two_graphs(recipe, schedule):
    eager, eager_opt = _train(recipe, schedule, compiled=False)
    torch._dynamo.reset()
    counters.clear()
    compiled, opt = _train(recipe, schedule, compiled=True)
    graphs = counters["stats"]["unique_graphs"]
    assert 1 <= graphs <= MAX_GRAPHS, f"{recipe} under {schedule}: {graphs} graphs in {STEPS} steps"
    for g, ge in zip(opt.param_groups, eager_opt.param_groups):
        assert float(g["lr"]) == float(ge["lr"])  # the same schedule
        assert torch.is_tensor(g["lr"]) or schedule == "float-writes"  # torch's schedulers fill_ in place
    atol = ATOL_BF16 if RECIPES[recipe][0] == torch.bfloat16 else ATOL
    for i, (a, b) in enumerate(zip(eager, compiled)):
        torch.testing.assert_close(b, a, rtol=0, atol=atol, msg=lambda m, i=i: f"{recipe}/{schedule} param {i}: {m}")


def test_lr_is_a_0d_tensor_per_group_that_reads_and_writes_like_a_float():
    """Converted at construction and in ``add_param_group``; a shared tensor default is cloned per
    group; a user's own tensor is kept (the same object); float math on it is the float's."""
    a, b, c = (nn.Parameter(torch.randn(4, 4)) for _ in range(3))
    mine = torch.tensor(0.5, dtype=torch.float64)
    opt = optim.Muon([{"params": [a]}, {"params": [b], "use_muon": False, "lr": mine}], lr=0.02)
    opt.add_param_group({"params": [c], "use_muon": False, "lr": 3e-4})
    lrs = [g["lr"] for g in opt.param_groups]
    assert all(torch.is_tensor(x) and x.ndim == 0 and x.dtype == torch.float64 for x in lrs)
    assert [float(x) for x in lrs] == [0.02, 0.5, 3e-4]
    assert lrs[1] is mine
    shared = torch.tensor(1e-3)
    opt2 = optim.AdamW([{"params": [a]}, {"params": [b]}], lr=shared)
    assert opt2.param_groups[0]["lr"] is not opt2.param_groups[1]["lr"]
    opt2.param_groups[0]["lr"].fill_(5e-4)
    assert float(opt2.param_groups[1]["lr"]) == pytest.approx(1e-3)
    scion = optim.Scion([a], lr=0.125)
    assert torch.is_tensor(scion.param_groups[0]["lr"]) and float(scion.param_groups[0]["lr"]) == 0.125
