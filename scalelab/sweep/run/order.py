"""The order a launch hands its runs to a backend: longest first.

With ``max_parallel`` slots (the local backend's processes, a Slurm array's throttle), the
runs that start last decide when the sweep ends. Starting the longest runs first is
Graham's LPT rule (Graham 1969, "Bounds on multiprocessing timing anomalies", SIAM J. Appl.
Math. 17(2)): its makespan is at most 4/3 - 1/(3m) of the optimum on m slots, where plan
order (e.g. the largest model's run last) can leave one slot training alone for most of
the largest run's time.

A run's cost is estimated from the plan as ``steps * STEP_OVERHEAD_FLOPS + flops``: per
step, a fixed overhead (Python, the dispatcher, small kernels) plus the model's FLOPs.
The overhead is stated in FLOPs the machine would compute in that time; only the order
matters, so one machine's value serves (a GPU's overhead is larger in FLOPs, which only
moves small runs earlier among equals).
"""

from __future__ import annotations

from collections.abc import Sequence

__all__ = ["STEP_OVERHEAD_FLOPS", "longest_first"]

STEP_OVERHEAD_FLOPS = 1.1e9
"""One step's fixed cost, in FLOPs: measured on a 2-core CPU (one thread per run, batch
16 x 128 byte tokens), a step of the twin-* models takes about 16 ms + 15 ms per GFLOP
(twin-26k 22 ms at 0.40 GFLOP, twin-80k 33 ms at 1.1, twin-271k 68 ms at 3.5), i.e. the
overhead is worth about 1.1 GFLOP."""


def longest_first(steps: Sequence[float], flops: Sequence[float]) -> list[int]:
    """Indices of the runs, the most costly first (plan order among equal costs).

    steps, flops: per run, its optimizer steps and training FLOPs (plan.parquet's columns);
    a missing value (None or NaN) counts as 0.
    """
    if len(steps) != len(flops):
        raise ValueError(f"steps and flops differ in length ({len(steps)} vs {len(flops)})")

    def cost(i: int) -> float:
        s, f = (float(v) if v is not None and v == v else 0.0 for v in (steps[i], flops[i]))
        return s * STEP_OVERHEAD_FLOPS + f

    return sorted(range(len(steps)), key=lambda i: (-cost(i), i))
