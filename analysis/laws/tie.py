"""Tied parameters: ``tie={"beta": "alpha"}`` makes beta share alpha's free coordinate.

Muennighoff et al. 2023 (arXiv 2305.16264) fit their data-constrained law with alpha = beta;
a tie is that constraint. The fitter works in the internal parametrisation (laws.py), so a
tie equates internal values: both parameters must be of one kind (both fitted as logs, like
A and B, or both as is, like alpha and beta). The tied parameter reads its target's
coordinate, the box of that coordinate is the intersection of both boxes, and the fit
reports both values (equal).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

import numpy as np

from analysis.errors import AnalysisInputError
from analysis.laws.laws import Law

__all__ = ["Coordinates", "coordinates"]


@dataclass(frozen=True)
class Coordinates:
    """How a fit's varied parameters map onto its free coordinates (the columns of z)."""

    varied: tuple[str, ...]
    """The parameters that are not fixed, in the law's order."""
    names: tuple[str, ...]
    """One name per free coordinate: the varied parameters that are not tied to another."""
    tied: dict[str, str]
    """Tied parameter -> the parameter whose coordinate it shares."""

    @property
    def index(self) -> np.ndarray | None:
        """(len(varied),) column of z per varied parameter; None when nothing is tied."""
        if not self.tied:
            return None
        return np.array([self.names.index(self.tied.get(p, p)) for p in self.varied], dtype=int)

    def members(self, name: str) -> tuple[str, ...]:
        """The coordinate ``name`` and the parameters tied to it."""
        return (name, *(p for p, t in self.tied.items() if t == name))


def coordinates(law: Law, fixed: Mapping[str, float], tie: Mapping[str, str] | None) -> Coordinates:
    """Check ``tie`` against ``law`` and ``fixed``; one-line AnalysisInputError on misuse."""
    tie = dict(tie or {})
    law.check_names(tie)
    law.check_names({t: None for t in tie.values()})
    for p, t in tie.items():
        if p == t:
            raise AnalysisInputError(f"tie: '{p}' is tied to itself")
        if t in tie:
            raise AnalysisInputError(
                f"tie: '{p}' -> '{t}' -> '{tie[t]}' is a chain; tie both to '{tie[t]}'"
            )
        for q in (p, t):
            if q in fixed:
                raise AnalysisInputError(
                    f"tie: '{q}' is fixed; fix both '{p}' and '{t}' instead of tying them"
                )
        if (p in law.log_params) != (t in law.log_params):
            raise AnalysisInputError(
                f"tie: '{p}' and '{t}' are parametrised differently (one is fitted as a log): "
                "only parameters of one kind can share a coordinate"
            )
    varied = tuple(p for p in law.param_names if p not in fixed)
    names = tuple(p for p in varied if p not in tie)
    return Coordinates(varied=varied, names=names, tied=tie)
