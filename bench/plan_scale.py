"""Time planning a 10,000-run sweep (target: plan < 1 s) and a 150,000-run one (target:
`scalelab sweep SPEC --dry-run` < 30 s, the whole command).

The spec is the setting of Kim et al. 2025, *Pre-training under infinite compute* (arXiv
2509.14786: seq 4096, batch 64, U = 209.7M, the four Llama shapes) over a denser grid:
4 shapes x 10 lr x 10 wd x 25 epochs = 10,000 runs, with one derive rule evaluated per run;
the large spec adds 15 seeds (150,000 runs: past the ~65,000 runs at which 8-hex run ids
collide by chance, docs/architecture.md). Timed separately, best of ``--repeat``:

* ``load_spec``: YAML -> validated Spec;
* ``expand``: the pure plan (configs, run ids, N, D, steps, FLOPs, GPU-hours) - the target;
* ``render_plan``: the dry-run table (60 rows shown) rendered to text;
* the paper-scale sweeps shipped in sweeps/ (plan = load + expand);
* 150,000 runs: ``expand``, and the dry-run command end to end in a fresh process
  (imports, plan, the diff against an empty sweep directory, the table), best of
  ``--repeat-large``.

    python bench/plan_scale.py [--repeat 5] [--repeat-large 2]

This file is the plan half of the scale bench; status and collect over 10,000 run
directories are timed by bench/lifecycle_scale.py.
"""

from __future__ import annotations

import argparse
import io
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from rich.console import Console

from scalelab.sweep.plan.expand import expand
from scalelab.sweep.spec.load import load_spec
from scalelab.sweep.view.render import render_plan

SWEEPS = Path(__file__).resolve().parents[1] / "sweeps"

SPEC = """\
name: plan_scale
base:
  model: {preset: '150M'}
  data: {dataset: /nonexistent/dclm, vocab_size: 128256, seq_len: 4096, unique_tokens: 209715200}
  train: {batch_size: 64}
grid:
  model.preset: ['150M', '300M', '600M', '1.4B']
  optim.lr: [1.0e-4, 2.0e-4, 3.0e-4, 5.0e-4, 1.0e-3, 2.0e-3, 3.0e-3, 5.0e-3, 1.0e-2, 3.0e-2]
  optim.weight_decay: [0, 0.1, 0.2, 0.4, 0.8, 1.6, 3.2, 6.4, 12.8, 25.6]
  data.epochs: [EPOCHS]
derive:
  optim.aux_lr: "optim.lr / 2"
launcher: {flops_per_gpu_s: 3.96e14}
""".replace("EPOCHS", ", ".join(str(e) for e in range(1, 26)))
SEEDS = 15
SPEC_LARGE = SPEC.replace("launcher:", f"seeds: {list(range(SEEDS))}\nlauncher:")


def best_of(repeat: int, fn) -> tuple[tuple[float, float], object]:
    """(best wall seconds, best CPU seconds of this process and its children), last result."""
    walls, cpus, out = [], [], None
    for _ in range(repeat):
        t0, c0 = time.perf_counter(), _cpu()
        out = fn()
        walls.append(time.perf_counter() - t0)
        cpus.append(_cpu() - c0)
    return (min(walls), min(cpus)), out


def _cpu() -> float:
    """CPU seconds of this process and of its waited-for children."""
    t = os.times()
    return t.user + t.system + t.children_user + t.children_system


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--repeat-large", type=int, default=2)
    args = parser.parse_args()

    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "plan_scale.yaml"
        path.write_text(SPEC)
        t_load, spec = best_of(args.repeat, lambda: load_spec(path))
        large = Path(tmp) / "plan_scale_150k.yaml"
        large.write_text(SPEC_LARGE)
        t_large, n_large = best_of(args.repeat_large, lambda: len(expand(load_spec(large))))
        t_cli, _ = best_of(args.repeat_large, lambda: dry_run(large, Path(tmp) / "sweeps"))
    expand(spec)  # warm imports and per-process caches once, as a CLI call would not reuse
    t_expand, plan = best_of(args.repeat, lambda: expand(spec))

    def render() -> str:
        console = Console(file=io.StringIO(), width=250)
        console.print(render_plan(plan))
        return console.file.getvalue()

    t_render, _ = best_of(args.repeat, render)
    rows = [("load_spec (10,000-run spec)", t_load, None),
            (f"expand -> {len(plan):,} runs", t_expand, 1.0),
            ("render_plan (dry-run table)", t_render, None)]
    for name in ("200M_tokens.yaml", "200M_tokens_scion.yaml"):
        path = SWEEPS / name
        t, p = best_of(args.repeat, lambda path=path: expand(load_spec(path)))  # blocks too
        rows.append((f"plan sweeps/{name} ({len(p.table):,} runs)", t, None))
    rows += [(f"load + expand -> {n_large:,} runs", t_large, None),
             (f"scalelab sweep --dry-run, {n_large:,} runs", t_cli, 30.0)]

    print(f"{'step':<48} {'wall s':>8} {'cpu s':>8}  target (wall)")
    for label, (wall, cpu), target in rows:
        verdict = "" if target is None else (f"< {target:g} s " + ("ok" if wall < target else "MISSED"))
        print(f"{label:<48} {wall:8.3f} {cpu:8.3f}  {verdict}")
    load = ", ".join(f"{x:.1f}" for x in os.getloadavg())
    print(f"(best of {args.repeat}; {os.cpu_count()} CPUs, load average {load}: wall > cpu means "
          f"this process waited for a core; {plan.table['flops'].sum():.3g} FLOPs planned)")


def dry_run(spec_path: Path, sweeps_dir: Path) -> None:
    """``scalelab sweep SPEC --dry-run --root SWEEPS`` in a fresh process, its output
    discarded."""
    cmd = [sys.executable, "-c", "import sys; from scalelab.cli import main; sys.exit(main())",
           "sweep", str(spec_path), "--dry-run", "--root", str(sweeps_dir)]
    subprocess.run(cmd, check=True, stdout=subprocess.DEVNULL)


if __name__ == "__main__":
    main()
