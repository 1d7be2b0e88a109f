"""The notebooks executed against a real sweep's output (``tiny_sweep``: debug backend,
collected), as CI runs them: every cell runs and the figures exist. With nbclient and a
kernel installed each notebook runs as a notebook (jupytext -> nbformat -> nbclient);
otherwise as a script with MPLBACKEND=Agg, counting the figures ``show`` saves under
ANALYSIS_OUT."""

from __future__ import annotations

import importlib.util
import os
import subprocess
import sys
from pathlib import Path

import pytest
from _waits import CEILING_S

NOTEBOOKS = Path(__file__).resolve().parents[2] / "analysis" / "notebooks"
FIGURES = {
    "01_fit_sweep.py": {"training_curves", "norm_trajectories", "update_norms", "loss_vs_N_0"},
    "03_infinite_compute_recipes.py": {"recipes"},
    "04_transfer_laws.py": set(),  # the tiny sweep has two weight decays: too few for a law
}
PUBLISHED = {"published_recipes", "transfer_deepseek_lr", "transfer_deepseek_batch_size",
             "transfer_joint_batch"}
"""Figures of the notebooks' no-sweep sections (published or synthetic numbers)."""
_KERNEL = all(importlib.util.find_spec(m) for m in ("jupytext", "nbformat", "nbclient", "ipykernel"))


def _execute(path: Path, env: dict[str, str]) -> None:
    if _KERNEL:  # the notebook as Jupyter runs it
        import jupytext
        from nbclient import NotebookClient

        nb = jupytext.read(path)
        old = dict(os.environ)
        os.environ.update(env)
        try:
            NotebookClient(nb, timeout=int(CEILING_S), kernel_name="python3",
                           resources={"metadata": {"path": str(path.parent)}}).execute()
        finally:
            os.environ.clear()
            os.environ.update(old)
        return
    proc = subprocess.run([sys.executable, str(path)], env=env, capture_output=True, text=True,
                          timeout=CEILING_S, check=False)
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-3000:]


@pytest.mark.parametrize("name", sorted(FIGURES))
def test_notebook_runs_on_a_real_sweep(tiny_sweep, tmp_path, name):
    env = {k: v for k, v in os.environ.items() if not k.startswith("SCALELAB_NB_")}
    env.update(MPLBACKEND="Agg", ANALYSIS_OUT=str(tmp_path), SCALELAB_NB_N_BOOT="10",
               SCALELAB_NB_SWEEP=str(tiny_sweep))
    _execute(NOTEBOOKS / name, env)
    made = {p.stem for p in tmp_path.glob("*.png")}
    assert FIGURES[name] <= made, sorted(made)
    assert not made & PUBLISHED  # the published/synthetic sections only run without a sweep
    for stem in FIGURES[name]:
        assert (tmp_path / f"{stem}.png").stat().st_size > 5_000


@pytest.mark.parametrize("name", sorted(p.name for p in NOTEBOOKS.glob("*.py")))
def test_notebooks_are_jupytext_with_a_parameters_cell(name):
    jupytext = pytest.importorskip("jupytext")
    nb = jupytext.read(NOTEBOOKS / name)
    code = [c for c in nb.cells if c.cell_type == "code"]
    assert code and any("matplotlib" in c.source or "show(" in c.source for c in code)
    params = [c for c in code if "parameters" in c.metadata.get("tags", [])]
    assert len(params) == 1 and "= parameters(" in params[0].source  # notebook_params
    assert code.index(params[0]) == 0  # papermill injects after the first (parameters) cell
    if name in FIGURES:
        assert 'SWEEP="",' in params[0].source
