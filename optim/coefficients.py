"""Newton-Schulz coefficient presets, as data with their sources.

Each step k maps every singular value through the odd quintic
``p_k(s) = a_k s + b_k s^3 + c_k s^5`` and keeps the singular vectors. A preset is
a list of per-step triples (a, b, c) plus the Frobenius prescale factor ``f``: the
input is divided by ``f * ||X||_F + EPS`` so that every singular value lies in
``[0, 1/f]`` before the first step.

``resolve(coefficients, steps)`` turns a preset name or an explicit list of triples
into the exact per-step schedule used by ``optim.newton_schulz`` and ``band``.
"""

from __future__ import annotations

import difflib
from collections.abc import Sequence
from dataclasses import dataclass

__all__ = ["EPS", "PRESETS", "Coefficients", "Preset", "resolve"]

Triple = tuple[float, float, float]
Coefficients = str | Sequence[Sequence[float]]

EPS = 1e-30
"""Added to the prescale denominator. The published 1e-7/1e-6 break scale invariance for
tiny inputs (NeMo #229); 1e-30 keeps a zero matrix at zero (0/eps = 0,
never 0/0 = NaN). ``newton_schulz`` divides by max|X| first, so ||X||_F >= 1 there and
EPS perturbs nothing."""


@dataclass(frozen=True, kw_only=True)
class Preset:
    """A named Newton-Schulz schedule."""

    name: str
    """Preset name accepted by ``newton_schulz(coefficients=...)``."""
    triples: tuple[Triple, ...]
    """Per-step (a, b, c); step k uses ``triples[k]``."""
    prescale: float
    """Frobenius factor f: X <- X / (f * ||X||_F + EPS)."""
    repeat_last: bool
    """If True, steps beyond ``len(triples)`` reuse the last triple; otherwise they are an error."""
    source: str
    """Where the numbers come from."""


_JORDAN: Triple = (3.4445, -4.7750, 2.0315)

# Polar Express (arXiv 2505.16932) 5-step set, as in KellerJordan/modded-nanogpt and
# microsoft/dion.
_PE5: tuple[Triple, ...] = (
    (8.156554524902461, -22.48329292557795, 15.878769915207462),
    (4.042929935166739, -2.808917465908714, 0.5000178451051316),
    (3.8916678022926607, -2.772484153217685, 0.5060648178503393),
    (3.285753657755655, -2.3681294933425376, 0.46449024233003106),
    (2.3465413258596377, -1.7097828382687081, 0.42323551169305323),
)

# Polar Express paper (arXiv 2505.16932, NoahAmsel/PolarExpress), optimal_composition(l=1e-3,
# num_iters=8, safety_factor_eps=1e-2, cushion=0.02): raw Remez values.
_PE8_RAW: tuple[Triple, ...] = (
    (8.28721201814563, -23.595886519098837, 17.300387312530933),
    (4.107059111542203, -2.9478499167379106, 0.5448431082926601),
    (3.9486908534822946, -2.908902115962949, 0.5518191394370137),
    (3.3184196573706015, -2.488488024314874, 0.51004894012372),
    (2.300652019954817, -1.6689039845747493, 0.4188073119525673),
    (1.891301407787398, -1.2679958271945868, 0.37680408948524835),
    (1.8750014808534479, -1.2500016453999487, 0.3750001645474248),
    (1.875, -1.25, 0.375),
)


def _safety(t: Triple, s: float = 1.01) -> Triple:
    """Polar Express safety factor: p(x) -> p(x/s), i.e. a/s, b/s^3, c/s^5."""
    a, b, c = t
    return (a / s, b / s**3, c / s**5)


_PE8: tuple[Triple, ...] = tuple(_safety(t) for t in _PE8_RAW[:-1]) + (_PE8_RAW[-1],)

_YOUJIACHENG: tuple[Triple, ...] = (
    (4.0848, -6.8946, 2.9270),
    (3.9505, -6.3029, 2.6377),
    (3.7418, -5.5913, 2.3037),
    (2.8769, -3.1427, 1.2046),
    (2.8366, -3.0525, 1.2012),
)

PRESETS: dict[str, Preset] = {
    p.name: p
    for p in (
        Preset(
            name="jordan",
            triples=(_JORDAN,),
            prescale=1.0,
            repeat_last=True,
            source="KellerJordan/Muon quintic (also torch.optim.Muon, Scion, Moonlight); "
            "prescale X/(||X||_F + eps)",
        ),
        Preset(
            name="polar_express",
            triples=_PE5,
            prescale=1.02,
            repeat_last=False,
            source="Polar Express (arXiv 2505.16932) 5-step set as in modded-nanogpt and "
            "microsoft/dion; prescale X/(1.02 ||X||_F + eps)",
        ),
        Preset(
            name="polar_express_original",
            triples=_PE8,
            prescale=1.01,
            repeat_last=True,
            source="NoahAmsel/PolarExpress optimal_composition(l=1e-3, num_iters=8, "
            "safety_factor_eps=1e-2, cushion=0.02), safety 1.01 on all but the last "
            "triple, last triple (15/8, -10/8, 3/8) repeated; prescale X/(1.01 ||X||_F + eps)",
        ),
        Preset(
            name="youjiacheng",
            triples=_YOUJIACHENG,
            prescale=1.0,
            repeat_last=False,
            source="YouJiacheng 5-step set (microsoft/dion non-PE default); "
            "prescale X/(||X||_F + eps)",
        ),
    )
}


def resolve(coefficients: Coefficients, steps: int) -> tuple[list[Triple], float]:
    """Per-step triples (length ``steps``) and the prescale factor for a preset or list.

    An explicit list of triples is used as given with prescale 1.0 and must have exactly
    ``steps`` entries, or be a single triple (repeated; a flat (a, b, c) is accepted). A preset shorter than ``steps``
    repeats its last triple only where its source does (Jordan, PE original).
    """
    if isinstance(steps, bool) or not isinstance(steps, int) or steps < 1:
        raise ValueError(f"newton_schulz: steps must be a positive int, got {steps!r}")
    if isinstance(coefficients, str):
        preset = PRESETS.get(coefficients)
        if preset is None:
            names = ", ".join(sorted(PRESETS))
            close = difflib.get_close_matches(coefficients, list(PRESETS), n=1)
            hint = f"; did you mean {close[0]!r}?" if close else ""
            raise ValueError(
                f"newton_schulz: unknown coefficients preset {coefficients!r}; expected one of "
                f"{names} or a list of (a, b, c) triples{hint}"
            )
        triples = list(preset.triples[:steps])
        if len(triples) < steps:
            if not preset.repeat_last:
                raise ValueError(
                    f"newton_schulz: preset {preset.name!r} defines {len(preset.triples)} steps, "
                    f"got steps={steps}"
                )
            triples += [preset.triples[-1]] * (steps - len(triples))
        return triples, preset.prescale
    items = list(coefficients)
    if len(items) == 3 and all(isinstance(v, (int, float)) for v in items):
        items = [items]  # a single flat (a, b, c), as torch.optim.Muon's ns_coefficients
    triples = []
    for t in items:
        if len(t) != 3:
            raise ValueError(f"newton_schulz: each coefficient triple needs 3 values, got {t!r}")
        triples.append((float(t[0]), float(t[1]), float(t[2])))
    if len(triples) == 1:
        triples = triples * steps
    if len(triples) != steps:
        raise ValueError(
            f"newton_schulz: {len(triples)} coefficient triples given for steps={steps}"
        )
    return triples, 1.0
