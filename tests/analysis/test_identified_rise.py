"""``analysis.fit.identified.why_not_identified``: a loss that rises again with x is refused
with the rise in the data's numbers (where, how far, against the residual scatter), so a
report says in numbers why no asymptote is identified."""

import numpy as np

from analysis.fit.identified import why_not_identified


def test_a_rise_is_named_with_its_point_size_and_the_scatter():
    x = np.array([1.0, 2.0, 4.0, 8.0, 16.0])
    y = np.array([3.0, 2.5, 2.3, 2.45, 2.25])  # 8.0 lies 0.15 above the best (2.3) before it
    fitted = np.array([3.0, 2.5, 2.32, 2.28, 2.25])  # residuals 0, 0, -0.02, 0.17, 0
    scatter = float(np.sqrt(np.sum((y - fitted) ** 2) / (5 - 3)))
    why = why_not_identified(0.8, 2.1, x, y, fitted)
    assert why is not None and why.startswith("the loss rises again with x (the point at x = 8 lies "
                                              "0.1500 above the best loss at a smaller x"), why
    assert f"more than the residual scatter {scatter:.4f}" in why, why


def test_a_rise_within_the_scatter_is_not_a_reason():
    x = np.array([1.0, 2.0, 4.0, 8.0, 16.0])
    fitted = 2.0 + 0.1 / x  # 2.1 .. 2.006: a fall of 0.094
    y = fitted + np.array([0.0, 0.02, -0.01, 0.01, -0.02])  # 4 -> 8 rises 0.0075, scatter 0.0224
    assert y[3] > y[2]
    assert why_not_identified(1.0, 2.0, x, y, fitted) is None
