"""The epoch count at which one recipe overtakes another, with an interval that the noise of
every point supports, and nothing printed that it does not.

Prabhudesai et al. 2025 ("Diffusion Beats Autoregressive in Data-Constrained Settings", arXiv
2507.15857) report where a masked-diffusion model, worse at one epoch, overtakes an
autoregressive one as the same data are repeated. Here, for two recipes at one size, on the
epochs both sampled (e_1 < ... < e_k):

- the overtaker b is the recipe lower at the last shared epoch, a the other; d = L_b - L_a;
- the crossover is where d last turns negative: between the last sampled epoch with d >= 0
  and the next, by linear interpolation of d in ln(epochs) (``crossing``). When d < 0 at
  every shared epoch it lies at or before e_1 (-inf here), when d >= 0 at e_k after e_k
  (+inf: b does not overtake a within the sampled epochs);
- its interval: a parametric bootstrap of the points, each drawn from a normal with its own
  SD (``epoch_curves``: the Monte Carlo SE and the run-to-run noise), the same estimator on
  every draw, the (1 - level)/2 and (1 + level)/2 quantiles of the draws with +-inf kept as
  they fall (``Crossover``), each finite end then widened to the sampled epoch at or beyond
  it (``_bracket``): between two sampled epochs the curves' shapes are unknown, so the
  interval never claims to place a crossover inside a gap of the grid (on the CPU twin AR
  rises 2.6 -> 7.0 nats between epochs 32 and 128, far from the straight line the
  interpolation draws). An end at -inf or +inf means the noise cannot place it inside the
  sampled range.

``Crossover.line`` words each case: a crossover with both ends inside the range; one end
only ("by epoch X", "after epoch X"); no crossover, when at least (1 + level)/2 of the draws
agree that b is lower at every shared epoch; "not resolved" when the interval spans the whole
range. The linear interpolation between sampled epochs adds a bias of the curve's bend
between them; docs/diffusion.md gives the coverage measured on curves of known
crossover. Pure numpy.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from analysis.errors import AnalysisInputError

__all__ = ["N_BOOT", "Crossover", "crossing", "crossover"]

N_BOOT = 2000
"""Parametric bootstrap draws per crossover."""


def crossing(x: np.ndarray, d: np.ndarray) -> np.ndarray:
    """Per row of ``d`` (r, k) on ``x`` (k,) ascending (ln epochs): the x where d last turns
    negative (module docstring): -inf when d < 0 everywhere, +inf when d[-1] >= 0."""
    d = np.atleast_2d(d)
    out = np.full(d.shape[0], np.inf)
    ahead = d[:, -1] < 0
    nonneg = d >= 0
    any_nonneg = nonneg.any(axis=1)
    out[ahead & ~any_nonneg] = -np.inf
    rows = np.flatnonzero(ahead & any_nonneg)
    if rows.size:
        last = d.shape[1] - 1 - np.argmax(nonneg[rows, ::-1], axis=1)  # last index with d >= 0
        d0, d1 = d[rows, last], d[rows, last + 1]
        t = d0 / (d0 - d1)
        out[rows] = x[last] + t * (x[last + 1] - x[last])
    return out


@dataclass(frozen=True)
class Crossover:
    """Where ``b`` overtakes ``a`` at size ``N`` (epochs; +-inf outside the sampled range)."""

    a: str
    b: str
    N: float
    estimate: float
    lo: float
    hi: float
    first: float
    last: float
    """The shared epochs' range."""
    level: float
    gap_last: float
    """L_b - L_a at the last shared epoch (< 0), nats."""
    sd_last: float
    """Its SD."""

    @property
    def kind(self) -> str:
        """"crossover" (both ends inside), "by" (only an upper end), "after" (only a lower
        end), "none" (b lower throughout), "unresolved" (the whole range)."""
        lo_in, hi_in = math.isfinite(self.lo), math.isfinite(self.hi)
        if lo_in and hi_in:
            return "crossover"
        if self.hi == -math.inf:
            return "none"
        if hi_in:
            return "by"
        if lo_in:
            return "after"
        return "unresolved"

    @property
    def resolved(self) -> bool:
        return self.kind == "crossover"

    def line(self) -> str:
        pct = f"{100 * self.level:g}%"
        rng = f"epochs {_e(self.first)}-{_e(self.last)}"
        k = self.kind
        if k == "crossover":
            at = f"at epoch {_e(self.estimate)} (interpolated), " if math.isfinite(self.estimate) else ""
            return f"{self.b} overtakes {self.a} {at}{pct} interval {_e(self.lo)}-{_e(self.hi)} (sampled {rng})"
        if k == "none":
            return (f"no crossover within the sampled {rng}: {self.b} is lower at every shared epoch "
                    f"({pct} of the bootstrap draws agree)")
        if k == "by":
            return (f"{self.b} is lower than {self.a} by epoch {_e(self.hi)} ({pct} upper end); whether it "
                    f"is lower from the first sampled epoch ({_e(self.first)}) is not resolved")
        if k == "after":
            return (f"{self.b} overtakes {self.a} after epoch {_e(self.lo)} ({pct} lower end), if within the "
                    f"sampled {rng}: its gap at epoch {_e(self.last)} is {self.gap_last:+.3g} nats "
                    f"(SD {self.sd_last:.2g}), so that it overtakes there is not resolved")
        return (f"crossover of {self.a} and {self.b} not resolved: the {pct} interval spans the whole "
                f"sampled {rng}")


def _e(v: float) -> str:
    return f"{v:.3g}" if abs(v) < 1e3 else f"{v:,.0f}"


def crossover(epochs, loss_a, loss_b, sd_a, sd_b, *, names: tuple[str, str] = ("a", "b"), n: float = math.nan,
              n_boot: int = N_BOOT, level: float = 0.95, seed: int = 0) -> Crossover:
    """The crossover of two recipes' curves on shared ``epochs`` (k >= 2, ascending), each
    point with its SD (module docstring). ``names``: the two recipes (either may turn out
    to be the overtaker); ``n``: the size, carried into the result."""
    e = np.asarray(epochs, dtype=float)
    ya, yb = np.asarray(loss_a, dtype=float), np.asarray(loss_b, dtype=float)
    sa, sb = np.asarray(sd_a, dtype=float), np.asarray(sd_b, dtype=float)
    if not (e.ndim == 1 and e.size >= 2 and all(v.shape == e.shape for v in (ya, yb, sa, sb))):
        raise AnalysisInputError(f"crossover needs >= 2 shared epochs and one loss and SD per epoch, got "
                                 f"{e.shape}, {ya.shape}, {yb.shape}, {sa.shape}, {sb.shape}")
    if not (np.all(e > 0) and np.all(np.diff(e) > 0)):
        raise AnalysisInputError(f"epochs must be positive and ascending, got {e.tolist()}")
    if not (np.all(np.isfinite(sa)) and np.all(np.isfinite(sb)) and np.all(sa >= 0) and np.all(sb >= 0)):
        raise AnalysisInputError("the points' SDs must be finite and >= 0")
    if not 0 < level < 1 or n_boot < 10:
        raise AnalysisInputError(f"level must lie in (0, 1) and n_boot >= 10, got {level}, {n_boot}")
    a, b = names
    if yb[-1] > ya[-1]:  # the overtaker is the recipe lower at the last shared epoch
        a, b, ya, yb, sa, sb = b, a, yb, ya, sb, sa
    x = np.log(e)
    est = float(crossing(x, yb - ya)[0])
    rng = np.random.default_rng(seed)
    draws = (yb + sb * rng.standard_normal((n_boot, e.size))) - (ya + sa * rng.standard_normal((n_boot, e.size)))
    c = np.sort(crossing(x, draws))
    alpha = (1 - level) / 2
    lo = float(c[int(math.floor(alpha * n_boot))])
    hi = float(c[int(math.ceil((1 - alpha) * n_boot)) - 1])
    lo, hi = _bracket(x, lo, hi)
    return Crossover(a, b, float(n), _epochs(est), _epochs(lo), _epochs(hi), float(e[0]), float(e[-1]), level,
                     float(yb[-1] - ya[-1]), float(math.hypot(sa[-1], sb[-1])))


def _bracket(x: np.ndarray, lo: float, hi: float) -> tuple[float, float]:
    """(lo, hi) widened to the sampled epochs around them: where two curves cross between two
    sampled epochs is known only to lie between them (the interpolation assumes a straight
    line in ln epochs, and a curve that overfits bends far from one on a coarse grid)."""
    if math.isfinite(lo):
        lo = float(x[x <= lo + 1e-12].max(initial=x[0]))
    if math.isfinite(hi):
        hi = float(x[x >= hi - 1e-12].min(initial=x[-1]))
    return lo, hi


def _epochs(x: float) -> float:
    """ln epochs -> epochs, +-inf kept."""
    return x if math.isinf(x) else float(math.exp(x))
