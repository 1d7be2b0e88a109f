"""Linear minimization oracles (LMOs) of Scion (Pethick et al., arXiv 2502.07529; LIONS-EPFL/scion).

Each norm ball {W : ‖W‖ ≤ ρ} has an LMO  lmo(G) = argmin_{‖S‖≤ρ} ⟨G, S⟩ = -ρ·s(G),
where s(G) is the unit-radius element most aligned with G. Every class below gives

- ``direction(g)``: s(g) (unit radius, same shape as g, fp32 math),
- ``lmo(g, scale)``: -scale·s(g), the oracle itself,
- ``init_(w)``: an in-place norm-consistent init (before the ×ρ that ``Scion.init`` applies).

Weights are ``[d_out, d_in]``. Denominators add eps = 1e-8 (LIONS-EPFL/scion).
``rowwise`` marks LMOs that act on each row of the stored tensor independently, so on
an FSDP2 ``Shard(0)`` parameter they run on the local shard with no communication.

| class | s(G) | init (before ×ρ) |
|---|---|---|
| Spectral | polar(G)·sqrt(d_out/d_in) (options below the table) | orthogonal·factor |
| SpectralConv | polar(G.reshape(out, -1))·sqrt(out/in)/(kernel elements: kh·kw) | orthogonal per tap·factor |
| ColNorm | columns to RMS 1 (normalized: 1/d_in); transpose=True acts on rows (embedding) | normal, columns rescaled |
| RowNorm | rows to ℓ2 1/sqrt(d_in) (normalized=False: 1) | normal, rows rescaled |
| Sign | sign(G)/d_in (normalized=False: sign(G)) | ±1/d_in |
| BiasRMS | g/RMS(g) | zeros |
| Auto | ndim 3/4: SpectralConv; 2: Spectral; ≤1: BiasRMS | same dispatch |

Spectral's options: normalized=False: ·sqrt(d_out); max=True: factor floored at 1; blocks=k: per row block.
"""

from __future__ import annotations

import difflib
import math
from abc import ABC, abstractmethod
from dataclasses import dataclass, fields
from typing import ClassVar

import torch

__all__ = [
    "LMO",
    "NORMS",
    "Auto",
    "BiasRMS",
    "ColNorm",
    "RowNorm",
    "Sign",
    "Spectral",
    "SpectralConv",
    "norm_from_spec",
    "resolve_norm",
]

EPS = 1e-8


def _polar(g: torch.Tensor, method: str, steps: int, coefficients) -> torch.Tensor:
    """Orthogonal polar factor of g [..., m, n] (fp32 out): Newton-Schulz or exact SVD (U·Vᵀ)."""
    if method == "svd":
        u, _, vh = torch.linalg.svd(g.to(torch.float64), full_matrices=False)
        return (u @ vh).to(torch.float32)
    from .newton_schulz import newton_schulz

    return newton_schulz(g.to(torch.float32), steps=steps, coefficients=coefficients).to(
        torch.float32
    )


def _orthogonal_(w: torch.Tensor, generator: torch.Generator | None) -> torch.Tensor:
    """Orthogonal init in float64 (as LIONS-EPFL/scion), written back into w's dtype."""
    w64 = torch.empty(w.shape, dtype=torch.float64)
    torch.nn.init.orthogonal_(w64, generator=generator)
    with torch.no_grad():
        w.copy_(w64.to(device=w.device))
    return w


@dataclass(frozen=True)
class LMO(ABC):
    """Base class: subclasses define ``direction`` and ``init_``."""

    name: ClassVar[str] = "LMO"
    rowwise: ClassVar[bool] = False

    @abstractmethod
    def direction(self, g: torch.Tensor) -> torch.Tensor:
        """s(g): the unit-ball point the LMO scales by -scale (table in the module docstring)."""

    @abstractmethod
    def init_(self, w: torch.Tensor, *, generator: torch.Generator | None = None) -> torch.Tensor:
        """Fill ``w`` in place with the norm-matched init (before the radius)."""

    min_ndim: ClassVar[int] = 0
    max_ndim: ClassVar[int | None] = None

    def shape_problem(self, shape: tuple[int, ...]) -> str | None:
        """Why a param of ``shape`` cannot take this LMO (its rank rule: ``min_ndim`` ..
        ``max_ndim`` dims), or None. ``optim.Scion`` asks at construction, so a wrong norm is
        refused then, not met as an IndexError at the first step."""
        n = len(shape)
        if n < self.min_ndim or (self.max_ndim is not None and n > self.max_ndim):
            want = f"exactly {self.min_ndim}" if self.max_ndim == self.min_ndim else (
                f">= {self.min_ndim}" if self.max_ndim is None else f"{self.min_ndim}..{self.max_ndim}")
            return (f"{self.name} needs {want} dims, got {n}; use BiasRMS (or Auto) for vectors and "
                    "scalars, Sign for 1-D and up, Spectral or ColNorm/RowNorm for matrices")
        return None

    def lmo(self, g: torch.Tensor, scale: float = 1.0) -> torch.Tensor:
        """argmin over the radius-``scale`` ball of ⟨g, S⟩, i.e. -scale·s(g)."""
        return self.direction(g).mul_(-scale)

    def is_rowwise(self) -> bool:
        """True when the LMO acts on each stored row alone (local on a Shard(0) parameter)."""
        return self.rowwise

    def to_spec(self) -> dict:
        """``{"name": ..., field: value, ...}``: primitives only (an optimizer state_dict
        holding it loads with ``torch.load(weights_only=True)``); ``norm_from_spec`` inverts it."""
        return {"name": self.name, **{f.name: getattr(self, f.name) for f in fields(self)}}


@dataclass(frozen=True)
class Spectral(LMO):
    """Spectral-norm ball in RMS→RMS geometry: ‖W‖ = sqrt(d_in/d_out)·σ_max(W).

    normalized: factor sqrt(d_out/d_in) (True) or sqrt(d_out) (False, input layers).
    max: floor the factor at 1 (Disco ``image_spectral``).
    method: "newton_schulz" (``optim.newton_schulz``) or "svd" (exact U·Vᵀ, float64).
    blocks: split the rows into this many equal blocks, each with its own polar factor and
        shape factor (a fused [W_Q; W_K; W_V] weight: ``optim.fused_qkv``).
    """

    normalized: bool = True
    max: bool = False
    steps: int = 5
    coefficients: str | tuple = "jordan"
    method: str = "newton_schulz"
    blocks: int = 1
    name: ClassVar[str] = "Spectral"
    min_ndim: ClassVar[int] = 2

    def shape_problem(self, shape):
        problem = super().shape_problem(shape)
        if problem is None and shape[-2] % self.blocks:
            return f"its {shape[-2]} rows do not split into blocks={self.blocks} equal blocks"
        return problem

    def factor(self, d_out: int, d_in: int) -> float:
        f = math.sqrt(d_out / d_in) if self.normalized else math.sqrt(d_out)
        return max(1.0, f) if self.max else f

    def _rows(self, d_out: int) -> int:
        if d_out % self.blocks:
            raise ValueError(f"Spectral: {d_out} rows do not split into {self.blocks} blocks")
        return d_out // self.blocks

    def direction(self, g: torch.Tensor) -> torch.Tensor:
        """Batched over leading dims: g [..., d_out, d_in] (conv filters: ``SpectralConv``)."""
        rows = self._rows(g.shape[-2])
        x = g if self.blocks == 1 else g.unflatten(-2, (self.blocks, rows))  # [..., k, rows, in]
        o = _polar(x, self.method, self.steps, self.coefficients).reshape(g.shape)
        return o.mul_(self.factor(rows, g.shape[-1]))

    def init_(self, w, *, generator=None):
        rows = self._rows(w.shape[-2])
        for mat in w.view(-1, rows, w.shape[-1]):  # each [rows, d_in] block of a batch
            _orthogonal_(mat, generator)
        with torch.no_grad():
            return w.mul_(self.factor(rows, w.shape[-1]))


@dataclass(frozen=True)
class SpectralConv(LMO):
    """Conv filters [out, in, *kernel]: polar of the flattened [out, in·prod(kernel)],
    ×sqrt(out/in)/prod(kernel).

    The factor is Scion's conv scaling (Pethick et al. 2025, "Training deep learning models with
    norm-constrained LMOs", arXiv 2502.07529; LIONS-EPFL/scion): sqrt(d_out/d_in) divided by the
    number of kernel taps, k² for a square k×k kernel. For a kh×kw kernel the taps are kh·kw (a
    (1, 3) and a (3, 1) kernel both 3), the count a square kernel's k² stands for.
    """

    steps: int = 5
    coefficients: str | tuple = "jordan"
    method: str = "newton_schulz"
    name: ClassVar[str] = "SpectralConv"
    min_ndim: ClassVar[int] = 2

    @staticmethod
    def factor(shape: torch.Size) -> float:
        """sqrt(out/in) / (number of kernel taps) for a filter of ``shape`` [out, in, *kernel]."""
        out_c, in_c, taps = shape[0], shape[1], math.prod(shape[2:])
        return math.sqrt(out_c / in_c) / taps

    def direction(self, g):
        o = _polar(g.reshape(g.shape[0], -1), self.method, self.steps, self.coefficients)
        return o.reshape(g.shape).mul_(self.factor(g.shape))

    def init_(self, w, *, generator=None):
        taps = w.view(w.shape[0], w.shape[1], -1)  # [out, in, k^r]
        for t in range(taps.shape[2]):
            tap = torch.empty(taps.shape[:2], dtype=torch.float64)
            torch.nn.init.orthogonal_(tap, generator=generator)
            with torch.no_grad():
                taps[:, :, t].copy_(tap)
        with torch.no_grad():
            return w.mul_(self.factor(w.shape))


def _l2_norms(x: torch.Tensor, dim: int) -> torch.Tensor:
    """ℓ2 norms of the 2-D ``x`` along ``dim`` (0: of the columns, [1, n]; -1: of the rows,
    [m, 1]), ``x.norm(dim=dim, keepdim=True)`` in eager code.

    Under torch.compile the sums of squares are a matmul with a ones vector instead: Inductor's
    CPU backend (torch 2.13) crashes (``InductorError: KeyError: 'buf…'`` in
    ``try_outer_loop_fusion_with_local_buf``) when a row or column norm of a tensor is fused
    with the in-place update that produced it and an in-place update that consumes it, as in
    Scion's momentum → ColNorm/RowNorm → weight update (pure-torch reproduction in
    optim/README.md, "Speed: foreach and compile"). The matmul is an extern kernel between the
    two loops, so that fusion is never tried. Eager code keeps ``norm`` (unchanged bits); the
    compiled sums differ from it in summation order only (fp32 rounding).
    """
    if not torch.compiler.is_compiling():
        return x.norm(dim=dim, keepdim=True)
    sq = x * x
    if dim == 0:
        return (x.new_ones(1, x.shape[0]) @ sq).sqrt()
    return (sq @ x.new_ones(x.shape[-1], 1)).sqrt()


@dataclass(frozen=True)
class ColNorm(LMO):
    """ℓ1→RMS ball: every column to RMS 1 (normalized=True: RMS 1/d_in).

    transpose=True treats the stored tensor as Wᵀ: on a [vocab, dim] embedding each token
    row is normalized to RMS 1 (Disco ``embed_sqrt``); then the LMO is row-wise.
    """

    normalized: bool = False
    transpose: bool = False
    name: ClassVar[str] = "ColNorm"
    min_ndim: ClassVar[int] = 2
    max_ndim: ClassVar[int | None] = 2

    def is_rowwise(self) -> bool:
        return self.transpose

    def direction(self, g):
        x = g.to(torch.float32)
        x = x.t() if self.transpose else x  # [d_out, d_in]
        rms = _l2_norms(x, 0) / math.sqrt(x.shape[0])  # [1, d_in]
        if self.normalized:
            rms = rms * x.shape[1]
        s = x / (rms + EPS)
        return (s.t() if self.transpose else s).contiguous()

    def init_(self, w, *, generator=None):
        x = torch.randn(w.shape, dtype=torch.float32, generator=generator)
        x = x.t() if self.transpose else x
        x = x / x.norm(dim=0, keepdim=True) * math.sqrt(x.shape[0])
        if self.normalized:
            x = x / x.shape[1]
        with torch.no_grad():
            return w.copy_(x.t() if self.transpose else x)


@dataclass(frozen=True)
class RowNorm(LMO):
    """RMS→∞ ball: every row to ℓ2 1/sqrt(d_in) (normalized=False: ℓ2 1); Disco ``unembed_sqrt``."""

    normalized: bool = True
    transpose: bool = False
    name: ClassVar[str] = "RowNorm"
    min_ndim: ClassVar[int] = 2
    max_ndim: ClassVar[int | None] = 2

    def is_rowwise(self) -> bool:
        return not self.transpose

    def direction(self, g):
        x = g.to(torch.float32)
        x = x.t() if self.transpose else x
        n = _l2_norms(x, -1)  # [d_out, 1]
        if self.normalized:
            n = n * math.sqrt(x.shape[-1])
        s = x / (n + EPS)
        return (s.t() if self.transpose else s).contiguous()

    def init_(self, w, *, generator=None):
        x = torch.randn(w.shape, dtype=torch.float32, generator=generator)
        x = x.t() if self.transpose else x
        x = x / x.norm(dim=-1, keepdim=True)
        if self.normalized:
            x = x / math.sqrt(x.shape[-1])
        with torch.no_grad():
            return w.copy_(x.t() if self.transpose else x)


@dataclass(frozen=True)
class Sign(LMO):
    """Max-entry ball: sign(G)/d_in (normalized=False: sign(G), the ℓ1→∞ ball)."""

    normalized: bool = True
    zero_init: bool = False
    name: ClassVar[str] = "Sign"
    rowwise: ClassVar[bool] = True
    min_ndim: ClassVar[int] = 1

    def _d_in(self, shape: torch.Size) -> int:
        return math.prod(shape[1:]) if len(shape) >= 2 else shape[0]

    def direction(self, g):
        s = torch.sign(g.to(torch.float32))
        return s.div_(self._d_in(g.shape)) if self.normalized else s

    def init_(self, w, *, generator=None):
        with torch.no_grad():
            if self.zero_init:
                return w.zero_()
            x = torch.randint(0, 2, w.shape, generator=generator).to(torch.float32) * 2 - 1
            if self.normalized:
                x = x / self._d_in(w.shape)
            return w.copy_(x)


@dataclass(frozen=True)
class BiasRMS(LMO):
    """Vector RMS ball: g/RMS(g) over all elements (biases, gains)."""

    name: ClassVar[str] = "BiasRMS"

    def direction(self, g):
        x = g.to(torch.float32)
        return x / (x.pow(2).mean().sqrt() + EPS)

    def init_(self, w, *, generator=None):
        with torch.no_grad():
            return w.zero_()


@dataclass(frozen=True)
class Auto(LMO):
    """Dispatch on ndim: 3/4-D SpectralConv, 2-D Spectral, ≤1-D BiasRMS (LIONS-EPFL/scion)."""

    steps: int = 5
    coefficients: str | tuple = "jordan"
    method: str = "newton_schulz"
    name: ClassVar[str] = "Auto"

    def pick(self, ndim: int) -> LMO:
        if ndim >= 3:
            return SpectralConv(steps=self.steps, coefficients=self.coefficients, method=self.method)
        if ndim == 2:
            return Spectral(steps=self.steps, coefficients=self.coefficients, method=self.method)
        return BiasRMS()

    def direction(self, g):
        return self.pick(g.ndim).direction(g)

    def init_(self, w, *, generator=None):
        return self.pick(w.ndim).init_(w, generator=generator)


NORMS: dict[str, type[LMO]] = {
    c.name: c for c in (Spectral, SpectralConv, ColNorm, RowNorm, Sign, BiasRMS, Auto)
}


def resolve_norm(norm: str | LMO, **kwargs) -> LMO:
    """An LMO instance from a name ('Spectral', 'colnorm', ...) plus kwargs, or the instance itself."""
    if isinstance(norm, LMO):
        if kwargs:
            raise ValueError(f"norm_kwargs given with an LMO instance {norm!r}; put them in the instance")
        return norm
    lookup = {k.lower(): v for k, v in NORMS.items()}
    key = str(norm).replace("_", "").lower()
    if key not in lookup:
        close = difflib.get_close_matches(str(norm), list(NORMS), n=1)
        hint = f"; did you mean {close[0]!r}?" if close else ""
        raise ValueError(f"unknown Scion norm {norm!r} (one of {sorted(NORMS)}){hint}")
    return lookup[key](**kwargs)


def norm_from_spec(spec: dict) -> LMO:
    """The LMO that ``LMO.to_spec`` described."""
    kwargs = dict(spec)
    return resolve_norm(kwargs.pop("name"), **kwargs)
