"""What Newton-Schulz and Muon.step do on the CPU beyond the arithmetic: the layout of the
matrices the GEMMs read, and the memory a step holds at once. Counted through a
TorchDispatchMode, never timed (the times are bench/optim_step.py's Muon rows in the scalelab
repository).

- A tall matrix's NS reads its X [m, n] (m < n, after the transpose rule) as a contiguous
  tensor in every matmul; the transposed view of the tall memory (as before) made oneDNN's
  bf16 GEMMs 1.4-1.6x slower.
- ``Muon.step`` on the CPU holds one matrix's momentum blend U at a time: its peak of live new
  tensor bytes is the same for 2 and for 8 equal matrices (it held every U at once before,
  memory that the allocator handed back to the system after each step and faulted in again).
- From its second step on, it allocates no matrix-sized tensor at all: U, the bf16 copy and
  every NS product live in its workspace (``optim.workspace``), with the same bits as fresh
  tensors, and the inputs (grad, and the momentum buffer that is U without Nesterov) intact.
"""

from __future__ import annotations

import weakref

import pytest
import torch
from torch.utils._python_dispatch import TorchDispatchMode

import optim
from optim.newton_schulz import newton_schulz


class _Watch(TorchDispatchMode):
    """Records the aten op names, and the peak bytes of the live storages that ops create (a
    view of a storage adds nothing; a storage counts until its last tensor seen here dies)."""

    def __init__(self):
        super().__init__()
        self.ops: list[str] = []
        self.storages: dict[int, list[int]] = {}  # data_ptr -> [bytes, tensors alive]
        self.peak = 0

    def _drop(self, ptr: int) -> None:
        entry = self.storages[ptr]
        entry[1] -= 1
        if entry[1] == 0:
            del self.storages[ptr]

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        out = func(*args, **(kwargs or {}))
        self.ops.append(func.overloadpacket.__name__)
        inputs = [*args, *(kwargs or {}).values()]
        inputs += [t for a in inputs if isinstance(a, (list, tuple)) for t in a]
        known = {t.untyped_storage().data_ptr() for t in inputs if isinstance(t, torch.Tensor)}
        for t in out if isinstance(out, (list, tuple)) else [out]:
            if not isinstance(t, torch.Tensor) or t.untyped_storage().nbytes() == 0:
                continue
            ptr = t.untyped_storage().data_ptr()
            if ptr in known and ptr not in self.storages:
                continue  # written in place, or a view of a tensor from outside
            self.storages.setdefault(ptr, [t.untyped_storage().nbytes(), 0])[1] += 1
            weakref.finalize(t, self._drop, ptr)
        self.peak = max(self.peak, sum(nbytes for nbytes, _ in self.storages.values()))
        return out


class _MatmulOperands(TorchDispatchMode):
    """The (shape, contiguous) of every tensor operand of each matmul."""

    def __init__(self):
        super().__init__()
        self.calls: list[tuple[str, list[tuple[tuple[int, ...], bool]]]] = []

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        name = func.overloadpacket.__name__
        if name in ("mm", "addmm", "bmm", "baddbmm"):
            tensors = [a for a in args if isinstance(a, torch.Tensor)]
            self.calls.append((name, [(tuple(a.shape), a.is_contiguous()) for a in tensors]))
        return func(*args, **(kwargs or {}))


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float32])
@pytest.mark.parametrize("shape", [(80, 48), (2, 80, 48)])
def test_tall_matrix_iterates_on_a_contiguous_copy(shape, dtype):
    g = torch.randn(shape, generator=torch.Generator().manual_seed(0))
    with _MatmulOperands() as w:
        out = newton_schulz(g, 5, dtype=dtype)
    assert out.shape == g.shape
    assert len(w.calls) == 5 * 3 * (shape[0] if len(shape) == 3 else 1), w.calls
    with_x = [(name, ops) for name, ops in w.calls if any(s == (48, 80) for s, _ in ops)]
    assert len(with_x) == len(w.calls) * 2 // 3, w.calls  # X·Xᵀ and a·X + B·X of each step
    for name, operands in with_x:  # X [48, 80] as an operand: contiguous, never the tall view
        assert all(contiguous for s, contiguous in operands if s == (48, 80)), (name, operands)
    # the same matrix given wide: equal up to the norm's summation order over the two layouts
    # (fp32 1e-6 as test_newton_schulz's transposed case; bf16 2^-7, two ulps at |x| <= 0.5,
    # for a flipped input rounding carried through 5 steps; measured: 0 for both)
    wide = newton_schulz(g.mT.contiguous(), 5, dtype=dtype).mT
    torch.testing.assert_close(out, wide, rtol=0, atol=1e-6 if dtype == torch.float32 else 2.0**-7)


def _peak_step_bytes(count: int, foreach: bool, shape=(64, 96)) -> int:
    """Peak bytes of new tensors alive during the second step of ``count`` equal matrices."""
    gen = torch.Generator().manual_seed(0)
    params = [torch.nn.Parameter(torch.randn(shape, generator=gen)) for _ in range(count)]
    opt = optim.Muon(params, lr=0.02, weight_decay=0.1, foreach=foreach)
    for p in params:
        p.grad = torch.randn(shape, generator=gen)
    opt.step()  # the state (momentum buffers) is made here, outside the count
    with _Watch() as w:
        opt.step()
    return w.peak


@pytest.mark.parametrize("foreach", [True, False])
def test_muon_cpu_step_holds_one_matrix_at_a_time(foreach):
    two, eight = _peak_step_bytes(2, foreach), _peak_step_bytes(8, foreach)
    assert eight == two, (two, eight)  # not one more fp32 U (24 KiB) per matrix
    # U (fp32), its fp32 scaled product and bf16 copy, NS's bf16 products: measured 3.67 fp32
    # matrices (90,112 bytes); one more U (as holding two at once would be) makes 4.67
    assert two < 4 * 64 * 96 * 4, two


@pytest.mark.parametrize("foreach", [True, False])
def test_muon_cpu_step_allocates_no_matrix_after_the_first(foreach):
    """From the second step on, U, its bf16 copy and every NS product live in the optimizer's
    workspace (``optim.workspace``): no new tensor of a matrix's size, so nothing for the
    allocator to hand back to the system and fault in again (measured: 20 bytes of 0-d
    scalars; before the workspace, 90,112 bytes)."""
    assert _peak_step_bytes(3, foreach) <= 256


@pytest.mark.parametrize("nesterov", [True, False])
@pytest.mark.parametrize("shape", [(64, 96), (96, 64), (3, 40, 24)])
def test_workspace_gives_the_bits_of_fresh_tensors(shape, nesterov):
    """Two Muons on equal params, one taking the workspace path (one process, CPU), one the
    batched path without it (distributed_mode="ddp" with no process group: one rank):
    bitwise equal params after 3 steps; without Nesterov U is the momentum buffer itself,
    which the in-place prescale must leave alone (the momenta stay equal too)."""
    gen = torch.Generator().manual_seed(1)
    init = torch.randn(shape, generator=gen)
    grads = [torch.randn(shape, generator=gen) for _ in range(3)]
    kw = {"lr": 0.02, "weight_decay": 0.1, "nesterov": nesterov}
    a, b = torch.nn.Parameter(init.clone()), torch.nn.Parameter(init.clone())
    opt_a = optim.Muon([a], **kw)
    opt_b = optim.Muon([b], distributed_mode="ddp", **kw)
    assert opt_a._one_at_a_time([a]) and not opt_b._one_at_a_time([b])
    for g in grads:
        a.grad, b.grad = g.clone(), g.clone()
        opt_a.step()
        opt_b.step()
        assert torch.equal(a.grad, g)  # the grad is read, never written
    assert torch.equal(a, b)
    assert torch.equal(opt_a.state[a]["momentum_buffer"], opt_b.state[b]["momentum_buffer"])
    assert opt_a._workspace.nbytes > 0 and opt_b._workspace.nbytes == 0


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
@pytest.mark.parametrize("shape", [(40, 24), (24, 40), (2, 24, 40)])
def test_newton_schulz_workspace_and_overwrite(shape, dtype):
    """``workspace``: the same bits as without, the input untouched, the same buffers on the
    next call; ``overwrite``: the same result, the input's values spent."""
    from optim.workspace import Workspace

    g = torch.randn(shape, generator=torch.Generator().manual_seed(2))
    ref = newton_schulz(g, 5, dtype=dtype)
    ws = Workspace()
    kept = g.clone()
    first = newton_schulz(g, 5, dtype=dtype, workspace=ws, out_dtype=dtype)
    assert torch.equal(g, kept)
    assert torch.equal(first.to(g.dtype), ref)
    held = ws.nbytes
    again = newton_schulz(g, 5, dtype=dtype, workspace=ws, out_dtype=dtype)
    assert ws.nbytes == held and again.data_ptr() == first.data_ptr()
    spent = g.clone()
    assert torch.equal(newton_schulz(spent, 5, dtype=dtype, overwrite=True), ref)
