"""Start a function on N gloo ranks (forked processes) and wait for them, with a ceiling.

``torch.multiprocessing.start_processes(join=True)`` waits forever: a rank that hangs (a
deadlock in a destructor at exit, say) would hang the whole suite. ``run_ranks`` joins in
short polls, and at ``CEILING_S`` kills the ranks and fails, naming the ones still alive.
A rank that raises fails the test with its traceback, as with ``join=True``.
"""

from __future__ import annotations

import time
from collections.abc import Callable

import torch.multiprocessing as mp
from _waits import CEILING_S


def run_ranks(worker: Callable, args: tuple, nprocs: int = 2, ceiling: float = CEILING_S) -> None:
    """``worker(rank, *args)`` on ``nprocs`` forked processes; returns when all exit 0."""
    ctx = mp.start_processes(worker, args=args, nprocs=nprocs, join=False, start_method="fork")
    deadline = time.monotonic() + ceiling
    while not ctx.join(timeout=1.0):
        if time.monotonic() > deadline:
            alive = [i for i, p in enumerate(ctx.processes) if p.is_alive()]
            for p in ctx.processes:
                if p.is_alive():
                    p.kill()
            raise AssertionError(f"ranks {alive} still running after the {ceiling:.0f} s ceiling")
