"""Coverage of the precision law's effective-parameter multipliers on synthetic twins.

``python bench/precision_law_coverage.py [--studies 100] [--seed 0]``: ``--studies`` seeded
studies of ``analysis.synthetic.precision.synthetic_precision_runs`` (Kumar et al. 2024's
N_eff = N (1 - exp(-P/gamma)) with gamma = 2.5 bits; bf16, fp8, nvfp4 and mxfp4; 4 sizes x 4
epoch counts, 0.01 nats of noise), each fitted by ``fit_precision`` (one free multiplier per
format, bf16 = 1). Prints per format how many 95% profile CIs held the true multiplier, the
median CI width, and how many multipliers were flagged not identified. The test
(tests/analysis/test_precision_law.py) runs a 12-study slice of the same check; this is the
100-study measurement docs/precision.md quotes (each fit takes ~11 s of CPU).
"""

from __future__ import annotations

import argparse
import sys
import time
import warnings
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from analysis.fit.precision import fit_precision  # noqa: E402
from analysis.synthetic.precision import PRECISION_TRUTH, synthetic_precision_runs, true_multipliers  # noqa: E402
from analysis.tables.runs import prepare_runs  # noqa: E402

FORMATS = ("bf16", "fp8", "nvfp4", "mxfp4")


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--studies", type=int, default=100)
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args(argv)
    truth = true_multipliers(PRECISION_TRUTH["gamma"], FORMATS, "bf16")
    hits = {f: 0 for f in FORMATS[1:]}
    widths = {f: [] for f in FORMATS[1:]}
    flagged = {f: 0 for f in FORMATS[1:]}
    start = time.process_time()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        for s in range(args.studies):
            data = prepare_runs(synthetic_precision_runs(args.seed + s)).data
            for m in fit_precision(data, trends=False, gamma=False).multipliers:
                if m.why_not is not None:
                    flagged[m.fmt] += 1
                    continue
                hits[m.fmt] += m.ci[0] <= truth[m.fmt] <= m.ci[1]
                widths[m.fmt].append(m.ci[1] - m.ci[0])
    print(f"{args.studies} studies, {time.process_time() - start:.0f} s CPU")
    print("format  true m    CI holds it   median CI width   not identified")
    for f in FORMATS[1:]:
        print(f"{f:7s} {truth[f]:.4f}    {hits[f]:4d}/{args.studies:<4d}     {np.median(widths[f]):.4f}"
              f"            {flagged[f]}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
