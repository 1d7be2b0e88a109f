"""The model-free paired gaps of analysis.laws.precision_gaps: known additive gaps plus noise
are recovered with 95% t-intervals that cover them in about 95% of seeded studies, and a
format that never shares a cell with the reference gets no gap."""

from __future__ import annotations

import numpy as np
import polars as pl

from analysis.laws.precision_gaps import paired_gaps

GAPS = {"fp8": 0.0, "nvfp4": 0.02, "mxfp4": 0.05}  # true loss added to the reference's (nats)
NOISE = 0.01


def _runs(seed: int) -> pl.DataFrame:
    rng = np.random.default_rng(seed)
    rows = []
    for n in (1e4, 2e4, 4e4, 8e4, 1.6e5):
        for e in (4.0, 16.0, 64.0):
            base = 3.0 + 50 / n ** 0.4 + 0.2 * np.log(e) ** 2 / 10
            for fmt, gap in {"fp32": 0.0, **GAPS}.items():
                rows.append({"precision": fmt, "N": n, "U": 8192.0, "D": 8192.0 * e,
                             "loss": base + gap + NOISE * rng.standard_normal()})
    return pl.DataFrame(rows)


def test_gaps_cover_the_truth_and_detect_a_cost():
    hits = {f: 0 for f in GAPS}
    detected = {f: 0 for f in GAPS}
    for seed in range(200):
        for g in paired_gaps(_runs(seed), "fp32"):
            if g.epochs is None:
                hits[g.fmt] += g.ci[0] <= GAPS[g.fmt] <= g.ci[1]
                detected[g.fmt] += g.ci[0] > 0
    assert all(180 <= h <= 199 for h in hits.values()), hits  # 95% nominal: 190 expected
    assert detected["mxfp4"] == 200 and detected["nvfp4"] >= 190 and detected["fp8"] <= 10, detected


def test_per_epoch_gaps_and_the_words():
    gaps = paired_gaps(_runs(0), "fp32")
    mx = [g for g in gaps if g.fmt == "mxfp4"]
    assert [g.epochs for g in mx] == [None, 4.0, 16.0, 64.0] and [g.cells for g in mx] == [15, 5, 5, 5]
    assert mx[0].describe().endswith("worse than the reference")
    lone = pl.DataFrame({"precision": ["fp32", "fp8"], "N": [1e4, 2e4], "U": [1.0, 1.0], "D": [4.0, 4.0],
                         "loss": [3.0, 3.1]})
    assert paired_gaps(lone, "fp32") == []  # no shared cell: nothing to compare
