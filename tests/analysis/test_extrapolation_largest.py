"""analysis.recipes.extrapolation.holdout_largest: the holdout check for any k >= 1
(``scalelab fit --holdout-largest K``; docs/extrapolation.md). For k = 1, 2 it is
``holdout_check`` itself (exact equality: one code path)."""

from __future__ import annotations

import numpy as np
import pytest

from analysis import AnalysisInputError
from analysis.recipes.extrapolation import count_label, holdout_check, holdout_largest

X = np.geomspace(0.271 / 48, 0.271, 8)


def _y(seed: int = 0) -> np.ndarray:
    return 0.05 * X**-0.6 + 2.0 + 0.01 * np.random.default_rng(seed).standard_normal(X.size)


def test_k1_k2_are_holdout_check():
    for k in (1, 2):
        assert holdout_largest(X, _y(), k) == holdout_check(X, _y(), k)


def test_k3_refits_on_the_smallest_five():
    chk = holdout_largest(X, _y(), 3)
    assert chk.checked and chk.dof == 8 - 3 - 3 and [p.x for p in chk.points] == list(X[-3:])
    assert chk.line().startswith("held out the largest 3 (N = 89.7k, 156k, 271k): ")


def test_too_few_left_says_why_and_bad_k_raises():
    chk = holdout_largest(X, _y(), 5)
    assert not chk.checked and "would have 3, the law needs >= 4" in chk.why
    for k in (0, -1, 1.5, True):
        with pytest.raises(AnalysisInputError, match="integer >= 1"):
            holdout_largest(X, _y(), k)


def test_count_label_of_flops():
    assert count_label(1.74e12) == "1.74e+12" and count_label(1.2e9) == "1.2B"
