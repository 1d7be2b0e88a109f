"""optim.stochastic_round_: unbiased, two-neighbour, keyed, sharding- and replica-independent;
its random bits (one lowbias32 hash per pair of elements) equal a pure-Python reference and pass
statistical checks with written-down bounds (uniformity, independence of neighbours, of the
two halves of a pair, of consecutive steps and params; unbiased rounding over many keys)."""

import importlib.util
import math
import os
import subprocess
import sys
import tempfile

import pytest
import torch
import torch.distributed as dist
from _ranks import run_ranks
from _waits import CEILING_S

from optim.stochastic_rounding import lowbias32, piece_key, random16, sr_key, sr_key_tensor, stochastic_round_

N_DRAWS = 100_000


def _neighbours(x: float) -> tuple[float, float]:
    """The two bf16 values bracketing fp32 x: truncation toward zero and one bf16 ulp further out."""
    bits = torch.tensor([x], dtype=torch.float32).view(torch.int32)
    lo = (bits & -65536).view(torch.float32)
    hi = ((bits & -65536) + 65536).view(torch.float32)
    return lo.item(), hi.item()


# magnitudes 1e-30 .. 1e30, both signs, fractions near 0, 1/2 and 1 of an ulp, one exact value
VALUES = [1.0 + 2**-9, -(1.0 + 3 * 2**-10), math.pi, -math.e * 1e-3, 0.1, -7.77e5, 1.2345e-30, 3.3e30,
          1.0 + 2**-7 - 2**-14, -(2.0 + 2**-13), 0.75]  # fmt: skip


@pytest.mark.parametrize("x", VALUES)
def test_unbiased_and_two_neighbours(x):
    src = torch.full((N_DRAWS,), x, dtype=torch.float32)
    x32 = src[0].item()  # the fp32 value actually rounded
    out = stochastic_round_(torch.empty(N_DRAWS, dtype=torch.bfloat16), src, seed=7, step=3)
    vals = out.to(torch.float64)
    lo, hi = _neighbours(x32)
    # every draw is one of the two bf16 neighbours
    assert bool(((vals == lo) | (vals == hi)).all())
    # P(away from zero) = (x - lo)/(hi - lo): the mean is x within 4 standard errors
    p = (x32 - lo) / (hi - lo)
    se = abs(hi - lo) * math.sqrt(p * (1 - p) / N_DRAWS)
    mean = vals.mean().item()
    assert abs(mean - x32) <= 4 * se, (x32, mean, se)
    if 0 < p < 1:
        frac_up = (vals == hi).double().mean().item()
        assert abs(frac_up - p) <= 4 * math.sqrt(p * (1 - p) / N_DRAWS)
    else:  # exactly representable: no randomness at all
        assert bool((vals == x32).all())


def test_deterministic_for_fixed_key_and_varies_with_each_key_part():
    src = torch.randn(4096) * 3
    def sr(**kw):
        key = {"seed": 1, "step": 2, "param_id": 3} | kw
        return stochastic_round_(torch.empty(4096, dtype=torch.bfloat16), src, **key)
    ref = sr()
    assert torch.equal(ref, sr())
    for change in ({"seed": 2}, {"step": 3}, {"param_id": 4}):
        assert not torch.equal(ref, sr(**change)), change


def test_shard_rounds_like_full_tensor():
    full = torch.randn(37, 11)
    ref = stochastic_round_(torch.empty_like(full, dtype=torch.bfloat16), full, seed=5, step=9, param_id=2)
    # row shards at global flat offsets (torch.chunk-like, with an uneven and an empty tail)
    for chunks in (2, 3, 8):
        parts = []
        for rows in torch.arange(37).chunk(chunks):
            shard = full[rows]
            parts.append(stochastic_round_(torch.empty_like(shard, dtype=torch.bfloat16), shard,
                                           seed=5, step=9, param_id=2, offset=int(rows[0]) * 11))
        assert torch.equal(torch.cat(parts), ref)
    # a column block (non-contiguous in global order) through an explicit index tensor
    cols = slice(3, 8)
    index = torch.arange(37 * 11).view(37, 11)[:, cols]
    block = stochastic_round_(torch.empty(37, 5, dtype=torch.bfloat16), full[:, cols].contiguous(),
                              seed=5, step=9, param_id=2, offset=index)
    assert torch.equal(block, ref[:, cols])


def _reference_r(key: int, i: int) -> int:
    """r(i) from the module docstring's definition, in Python ints (no torch)."""
    q = i >> 1
    h = lowbias32(((q & (2**31 - 1)) ^ piece_key(key, q >> 31)) & 0xFFFFFFFF)
    return (h >> (16 * (i & 1))) & 0xFFFF


def test_lowbias32_matches_unsigned_arithmetic():
    """The Python reference equals lowbias32 written in numpy uint32 (native logical shifts,
    products mod 2^32: a second implementation), and is a bijection on a sample."""
    np = pytest.importorskip("numpy")
    xs = [0, 1, 2, 0x7FFFFFFF, 0x80000000, 0xFFFFFFFF] + [(v * 2654435761) & 0xFFFFFFFF for v in range(1, 2000)]
    h = np.array(xs, dtype=np.uint32)
    h ^= h >> np.uint32(16)
    h *= np.uint32(0x7FEB352D)
    h ^= h >> np.uint32(15)
    h *= np.uint32(0x846CA68B)
    h ^= h >> np.uint32(16)
    assert [lowbias32(v) for v in xs] == h.tolist()
    assert lowbias32(0) == 0  # xorshift-multiply hashes fix 0; the key XOR moves it away
    assert len({lowbias32(v) for v in xs}) == len(set(xs))


@pytest.mark.parametrize("start, n", [(0, 999), (5, 1000), (2**31 - 7, 20), (2**32 - 9, 30), (2**40 + 1, 17)])
def test_random_bits_equal_python_reference(start, n):
    """The torch path (range and index forms) equals the definition bit for bit, including
    odd starts and a range across the piece boundary at 2^32 elements."""
    key = sr_key(3, 2**33 + 1, 5)
    ref = [_reference_r(key, i) for i in range(start, start + n)]
    assert random16(key, (start, n)).tolist() == ref
    assert random16(key, torch.arange(start, start + n)).tolist() == ref


def test_random_bits_uniform_and_path_independent():
    key = sr_key(0, 1, 2)
    r = random16(key, (5, 80_000))
    assert torch.equal(r, random16(key, torch.arange(5, 80_005)))
    assert int(r.min()) >= 0 and int(r.max()) < 2**16
    # mean of U{0..2^16-1} is 32767.5, sd 18918.6: 5 standard errors over 80k draws
    assert abs(r.double().mean().item() - 32767.5) < 5 * 18918.6 / math.sqrt(80_000)
    # each of the 16 bits is set about half the time
    bits = torch.stack([(r >> b) & 1 for b in range(16)]).double().mean(dim=1)
    assert bool(((bits - 0.5).abs() < 5 * 0.5 / math.sqrt(80_000)).all())


N_STAT = 2**18  # draws per statistic
CHI2_BOUND = 370.0
"""Chi-square bound for 256 bins (255 degrees of freedom: mean 255, sd 22.6): 370 is about
5.1 sd, a p-value near 1e-6 (Wilson-Hilferty), for each of the 8 statistics below."""
CORR_BOUND = 5 / math.sqrt(N_STAT)
"""|Pearson correlation| bound: 5 standard errors of a zero correlation over N_STAT pairs."""


def _chi2_256(cells: torch.Tensor) -> float:
    counts = torch.bincount(cells.reshape(-1), minlength=256).double()
    expected = cells.numel() / 256
    return ((counts - expected) ** 2 / expected).sum().item()


def _corr(a: torch.Tensor, b: torch.Tensor) -> float:
    return torch.corrcoef(torch.stack((a.double(), b.double())))[0, 1].item()


def test_random_bits_statistics():
    """Uniformity and independence of r, as SR needs them: chi-square over 256 bins of the high
    and of the low 8 bits (the low bits set the rounding probability's fine steps), joint
    chi-squares of (high nibble, high nibble) of the two halves of a pair and of one element at
    consecutive steps, and correlations ~0 between neighbouring elements (i, i+1 and i, i+2),
    consecutive steps and consecutive param ids. A cheap hash that leaked counter structure
    into its low half, or a key mix that left steps correlated, fails these."""
    n = N_STAT
    draws = {(s, p): random16(sr_key(11, s, p), (0, 2 * n)) for s in (100, 101) for p in (0, 1)}
    r = draws[(100, 0)]
    assert _chi2_256(r[:n] >> 8) < CHI2_BOUND
    assert _chi2_256(r[:n] & 0xFF) < CHI2_BOUND
    # many keys (steps 0..255), few elements each: uniform across keys too
    across = torch.stack([random16(sr_key(11, s, 0), (1000, 1024)) for s in range(256)])
    assert _chi2_256(across >> 8) < CHI2_BOUND
    assert _chi2_256(across & 0xFF) < CHI2_BOUND
    even, odd = r[0::2], r[1::2]  # the two halves of one hash word
    assert _chi2_256((even >> 12) * 16 + (odd >> 12)) < CHI2_BOUND
    assert _chi2_256((r[1:-1:2] >> 12) * 16 + (r[2::2] >> 12)) < CHI2_BOUND  # across words
    nxt = draws[(101, 0)]
    assert _chi2_256((r[:n] >> 12) * 16 + (nxt[:n] >> 12)) < CHI2_BOUND
    assert _chi2_256((r[:n] & 0xF) * 16 + (nxt[:n] & 0xF)) < CHI2_BOUND
    pairs = {
        "pair halves": (even, odd),
        "words": (r[1:-1:2], r[2::2]),
        "i, i+2": (r[: n], r[2 : n + 2]),
        "steps": (r, nxt),
        "params": (r, draws[(100, 1)]),
    }
    for name, (a, b) in pairs.items():
        assert abs(_corr(a, b)) < 5 / math.sqrt(a.numel()), name
    # the low bits of the halves (a multiplicative hash's weakest) as well
    assert abs(_corr(even & 0xFF, odd & 0xFF)) < 5 / math.sqrt(even.numel())


def test_unbiased_over_many_keys():
    """E[SR(x)] = x over the keys: 4096 values with fractions spread over a bf16 ulp, each
    rounded at 512 steps. For each value the mean rounding error, in units of its standard
    error sqrt(p(1-p)/512)·ulp, must stay within 5.5 (4096 such z, normal tails: a false
    alarm about once in 6000 runs), and the pooled mean error within 5 standard errors."""
    steps = 512
    g = torch.Generator().manual_seed(0)
    x = (1 + torch.rand(4096, generator=g)) * 2.0 ** torch.randint(-20, 20, (4096,), generator=g)
    x = x * torch.where(torch.rand(4096, generator=g) < 0.5, -1.0, 1.0)
    lo = (x.view(torch.int32) & -65536).view(torch.float32).double()
    ulp = ((x.view(torch.int32) & -65536) + 65536).view(torch.float32).double() - lo  # signed
    p = (x.double() - lo) / ulp  # P(away from zero)
    err = torch.zeros(4096, dtype=torch.float64)
    dst = torch.empty(4096, dtype=torch.bfloat16)
    for s in range(steps):
        err += (stochastic_round_(dst, x, seed=4, step=s, param_id=1).double() - x.double()) / ulp
    mean = err / steps
    se = torch.sqrt(p * (1 - p) / steps)
    keep = se > 0
    assert bool(((mean[keep] / se[keep]).abs() < 5.5).all())
    pooled_se = torch.sqrt((p * (1 - p)).sum() / steps) / 4096
    assert abs(mean.mean().item()) < 5 * pooled_se.item()


@pytest.mark.parametrize("seed, step, pid", [(0, 0, 0), (7, 2**40, 3), (2**64 - 1, 2**63 - 1, 2**64 - 5)])
def test_tensor_key_equals_int_key(seed, step, pid):
    """The traced path's key (int64 tensor math) has the bits of the Python-int key."""
    key = sr_key(seed, step, pid)
    t = sr_key_tensor(seed, step, pid)
    assert t.dtype == torch.int64 and (int(t) & 0xFFFFFFFFFFFFFFFF) == key
    for piece in (0, 1, 2**31 + 3):
        assert int(piece_key(t, piece)) == piece_key(key, piece)


def test_traced_branch_equals_eager(monkeypatch):
    """What traced code runs (tensor key, arange counters, halves by shifts, Python-int
    constants, the NaN fix without the eager any-NaN test) writes the eager bits; the traced
    run itself is covered by optim/tests/test_compile.py (in the scalelab repository)."""
    g = torch.Generator().manual_seed(1)
    src = torch.randn(3001, generator=g) * torch.logspace(-30, 30, 3001)
    src[[0, 17, 3000]] = torch.tensor([float("nan"), float("inf"), -float("nan")])
    cases = [(0, 5, 0, 0), (3, 2**33, 2, 7), (1, 2, 3, 2**32 - 1001)]
    eager = [stochastic_round_(torch.empty(3001, dtype=torch.bfloat16), src, seed=a, step=b, param_id=c, offset=o)
             for a, b, c, o in cases]
    monkeypatch.setattr(torch.compiler, "is_compiling", lambda: True)
    for (a, b, c, o), ref in zip(cases, eager):
        out = stochastic_round_(torch.empty(3001, dtype=torch.bfloat16), src, seed=a, step=b, param_id=c, offset=o)
        assert torch.equal(out.view(torch.int16), ref.view(torch.int16)), (a, b, c, o)


def test_nan_inf_and_overflow():
    src = torch.tensor([float("nan"), float("inf"), -float("inf"), 0.0, -0.0, 3.3895e38])
    out = stochastic_round_(torch.empty(6, dtype=torch.bfloat16), src, seed=0, step=0)
    assert torch.isnan(out[0])
    assert out[1] == float("inf") and out[2] == -float("inf")
    assert out[3] == 0 and out[4] == 0
    bf16_max = torch.finfo(torch.bfloat16).max
    assert out[5] == bf16_max or out[5] == float("inf")  # rounds to the max or past it (torchao)


def test_rejects_non_bf16_destination():
    with pytest.raises(TypeError):
        stochastic_round_(torch.empty(3), torch.randn(3), seed=0, step=0)
    with pytest.raises(ValueError):
        stochastic_round_(torch.empty(2, dtype=torch.bfloat16), torch.randn(3), seed=0, step=0)


_TRITON_CHECK = """
import os, sys
os.environ["TRITON_INTERPRET"] = "1"
import torch

# the Triton SR kernel (the CUDA path) equals the torch reference bit for bit
from optim.sr_kernel import stochastic_round_triton_
from optim.stochastic_rounding import sr_key, stochastic_round_
g = torch.Generator().manual_seed(0)
src = torch.randn(2500, generator=g) * torch.logspace(-20, 20, 2500)
src[[3, 700, 2499]] = torch.tensor([float("nan"), float("inf"), -float("inf")])
for seed, step, pid, start in ((0, 1, 0, 0), (7, 2**40, 3, 13), (2**63 + 5, 9, 1, 2**35 + 3),
                               (1, 2, 3, 2**32 - 1001)):  # the last spans pieces 0 and 1
    ref = stochastic_round_(torch.empty(2500, dtype=torch.bfloat16), src, seed=seed, step=step,
                            param_id=pid, offset=start)
    out = stochastic_round_triton_(torch.empty(2500, dtype=torch.bfloat16), src, sr_key(seed, step, pid), start)
    if not torch.equal(out.view(torch.int16), ref.view(torch.int16)):
        bad = (out.view(torch.int16) != ref.view(torch.int16)).nonzero()[:5].flatten().tolist()
        sys.exit(f"SR kernel mismatch at seed={seed} start={start}: elements {bad}")
print("ok")
"""


def test_sr_kernel_matches_torch_path():
    """The Triton SR kernel (``optim.sr_kernel``, the CUDA path: lowbias32 in uint32) equals the
    torch path (int32 with masked shifts) bitwise, NaN/inf included, across a piece boundary; run in
    another process because TRITON_INTERPRET=1 must be set before triton is imported:
    in a fresh interpreter (never a fork of this threaded process)."""
    if importlib.util.find_spec("triton") is None:  # find_spec does not import it
        pytest.skip("triton not installed")
    env = {**os.environ, "TRITON_INTERPRET": "1"}
    proc = subprocess.run([sys.executable, "-c", _TRITON_CHECK], capture_output=True, text=True,
                          env=env, timeout=CEILING_S, check=False)
    assert proc.returncode == 0 and proc.stdout.strip() == "ok", proc.stderr[-2000:]


# ---- two gloo ranks -------------------------------------------------------------------------

def _ddp_worker(rank: int, world: int, init_file: str, result_file: str) -> None:
    dist.init_process_group("gloo", init_method=f"file://{init_file}", rank=rank, world_size=world)
    torch.manual_seed(0)  # the same replicated tensor on both ranks
    full = torch.randn(50, 7)
    out = stochastic_round_(torch.empty_like(full, dtype=torch.bfloat16), full, seed=3, step=11, param_id=4)
    gathered = [torch.empty_like(out) for _ in range(world)]
    dist.all_gather(gathered, out)
    rows = torch.arange(50).chunk(world)[rank]  # this rank's Shard(0) rows
    shard = stochastic_round_(torch.empty(len(rows), 7, dtype=torch.bfloat16), full[rows],
                              seed=3, step=11, param_id=4, offset=int(rows[0]) * 7)
    shards = [torch.empty(len(r), 7, dtype=torch.bfloat16) for r in torch.arange(50).chunk(world)]
    dist.all_gather(shards, shard)
    if rank == 0:
        torch.save({"replicas": gathered, "sharded": torch.cat(shards)}, result_file)
    dist.destroy_process_group()


@pytest.mark.xdist_group("dist")
def test_identical_on_two_gloo_ranks():
    with tempfile.TemporaryDirectory() as tmp:
        init_file, result_file = os.path.join(tmp, "init"), os.path.join(tmp, "out.pt")
        run_ranks(_ddp_worker, (2, init_file, result_file))
        res = torch.load(result_file)
    assert torch.equal(res["replicas"][0], res["replicas"][1])
    assert torch.equal(res["sharded"], res["replicas"][0])


@pytest.mark.cuda
def test_cuda_kernel_path_equals_cpu_reference():
    src = torch.randn(10_000) * 5
    ref = stochastic_round_(torch.empty(10_000, dtype=torch.bfloat16), src, seed=1, step=2, param_id=3, offset=17)
    dst = torch.empty(10_000, dtype=torch.bfloat16, device="cuda")
    out = stochastic_round_(dst, src.cuda(), seed=1, step=2, param_id=3, offset=17)
    assert torch.equal(out.cpu().view(torch.int16), ref.view(torch.int16))
