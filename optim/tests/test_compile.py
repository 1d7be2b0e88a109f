"""``torch.compile(opt.step)`` of optim.AdamW (fp32, and bf16 with round-to-nearest, an fp32
master or stochastic rounding) traces as one graph (``fullgraph=True``: a graph break is an
error) and steps as eager does.

Dynamo's "eager" backend: the graph is captured and run op by op, so this checks tracing
(graph breaks) without paying for Inductor's code generation. The traced ``addcmul_``
becomes an fma (one rounding instead of two), so fp32 agrees to ``RTOL`` (a few ulps; seen:
1 ulp), not bitwise. The step count, ``int(st["step"].item())``, is captured as an unbacked SymInt
(torch >= 2.x), so it is no break; the param write-back's data-pointer test was
(``optim._param_io.write_param_``).
"""

import pytest
import torch
import torch._dynamo

import optim

RTOL = 1e-6
CASES = {
    "fp32": (torch.float32, {}),
    "bf16-nearest": (torch.bfloat16, {}),
    "bf16-master": (torch.bfloat16, {"master_weights": True}),
    "bf16-sr": (torch.bfloat16, {"stochastic_rounding": True}),
}


def _train(dtype, kw, compiled: bool) -> list[torch.Tensor]:
    gen = torch.Generator().manual_seed(0)
    params = [torch.nn.Parameter(torch.randn(s, generator=gen).to(dtype)) for s in ((8, 4), (5,))]
    opt = optim.AdamW(params, lr=1e-2, weight_decay=0.1, **kw)
    torch._dynamo.reset()
    step = torch.compile(opt.step, backend="eager", fullgraph=True) if compiled else opt.step
    for _ in range(3):
        for p in params:
            p.grad = torch.randn(p.shape, generator=gen).to(dtype)
        step()
    return [p.detach().clone() for p in params]


@pytest.mark.parametrize("case", list(CASES))
def test_adamw_step_compiles_fullgraph_and_matches_eager(case):
    dtype, kw = CASES[case]
    eager = _train(dtype, kw, compiled=False)
    compiled = _train(dtype, kw, compiled=True)
    for a, b in zip(eager, compiled):
        torch.testing.assert_close(b.float(), a.float(), rtol=RTOL, atol=0, msg=case)


def _tiny_model() -> torch.nn.Module:
    torch.manual_seed(0)
    return torch.nn.Sequential(torch.nn.Embedding(32, 16), torch.nn.Linear(16, 16, bias=False),
                               torch.nn.Linear(16, 32, bias=False))


# AdamW is covered by the fullgraph test above: on torch 2.13 ``explain`` captures no graph of
# its step at all (graph_count 0, graph_break_count -1), so it cannot count breaks there.
OPTIMIZERS = {
    "muon": lambda m: optim.Muon(optim.muon_param_groups(m), lr=0.02),
    "scion": lambda m: optim.Scion(optim.scion_param_groups(m), lr=2**-10),
}


@pytest.mark.parametrize("name", list(OPTIMIZERS))
def test_step_traces_with_zero_graph_breaks(name):
    """``torch._dynamo.explain(opt.step)``: one graph, no break, for fp32 params (issue 13:
    Scion's per-parameter ``step.item()`` host sync broke its graph; it is now read only when
    stochastic rounding needs it)."""
    model = _tiny_model()
    opt = OPTIMIZERS[name](model)
    for p in model.parameters():
        p.grad = torch.randn_like(p)
    torch._dynamo.reset()
    explained = torch._dynamo.explain(opt.step)()
    assert explained.graph_break_count == 0, [str(b.reason) for b in explained.break_reasons]
    assert explained.graph_count == 1
