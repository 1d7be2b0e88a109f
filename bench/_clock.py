"""Device, thread and clock options shared by the CPU/GPU micro-benchmarks
(bench/newton_schulz.py, bench/optim_step.py): imported by name, since Python puts a
script's folder on sys.path."""

from __future__ import annotations

import argparse
import time
from collections.abc import Callable

import torch


def add_clock_args(ap: argparse.ArgumentParser) -> None:
    """--device, --threads and --clock (wall: perf_counter; process: this process' CPU time)."""
    ap.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    ap.add_argument("--threads", type=int, default=None, help="torch CPU threads (default: torch's)")
    ap.add_argument("--clock", choices=("wall", "process"), default="wall",
                    help="wall: perf_counter; process: CPU time of this process (CPU only)")


def device_and_clock(ap: argparse.ArgumentParser, args: argparse.Namespace) -> tuple[torch.device, Callable[[], float]]:
    """The device and the clock the options ask for; sets the CPU threads. A process clock on
    CUDA is refused (it would not see the GPU's time)."""
    device = torch.device(args.device)
    if args.threads:
        torch.set_num_threads(args.threads)
    if args.clock == "process" and device.type == "cuda":
        ap.error("--clock process measures CPU time: use it on CPU only")
    return device, (time.process_time if args.clock == "process" else time.perf_counter)
