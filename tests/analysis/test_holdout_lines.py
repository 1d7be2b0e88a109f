"""The report's extrapolation check (``analysis.report.holdout_lines``): every identified
law vs N is refitted without its largest size (and largest two with >= 6 sizes) and the
held-out losses are predicted; the data law likewise; an unidentified law has no line."""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from test_recipe_verdicts import _runs  # noqa: E402

from analysis.recipes.infinite_compute import analyze  # noqa: E402
from analysis.report.holdout_lines import holdout_lines  # noqa: E402


def test_identified_laws_are_checked_on_their_largest_sizes():
    """Both recipes follow A/x^B + E exactly up to noise 0.003: every held-out loss lies in
    its 95% interval, within 0.02 nats of the refit's prediction (4 sigma of the noise plus
    the refit's own error)."""
    lines = holdout_lines(analyze(_runs(2.10, 1.95)))
    by_law = {name: [ln for ln in lines if ln.startswith(f"{name} vs N:")] for name in ("standard", "regularized")}
    for _name, found in by_law.items():
        assert len(found) == 2, lines  # k = 1 and k = 2 (8 sizes)
        assert "held out N = 271k" in found[0] and "largest 2 (N = 132k, 271k)" in found[1], found
        assert "NOT covered" not in " ".join(found), found
        errors = [float(part.split(" nats")[0]) for ln in found for part in ln.split("error ")[1:]]
        assert errors and max(abs(e) for e in errors) < 0.02, errors


def test_an_overfitting_law_is_not_checked():
    lines = holdout_lines(analyze(_runs(2.10, 1.95, rising=True)))
    assert not any(ln.startswith("standard vs N") for ln in lines), lines
    assert any(ln.startswith("regularized vs N") for ln in lines), lines


def test_a_missed_extrapolation_says_not_covered():
    """The regularized loss drops 0.03 nats below its law at the largest size (10 sigma; it
    still falls, so the law stays identified): the refit without that size must miss it."""
    runs = _runs(2.10, 1.95)
    big = (runs["N"] == runs["N"].max()) & (runs["optim.weight_decay"] == 1.0)
    runs = runs.with_columns(runs["final_loss"].zip_with(~big, runs["final_loss"] - 0.03))
    lines = [ln for ln in holdout_lines(analyze(runs)) if ln.startswith("regularized vs N: held out N")]
    assert lines and "NOT covered" in lines[0], lines
    assert np.isfinite(float(lines[0].split("error ")[1].split(" nats")[0]))
