"""The names of a sweep directory's parts and of a run directory's files: the one owner.

The sweep writes them (``scalelab.sweep``), a run writes its own directory
(``scalelab.train``), ``collect``, ``fit``, ``report``, ``compare``, ``next``, the adaptive
loop, the notebooks and the benchmarks read them. Every module spells a name through this
module (scalelab through ``scalelab.store.layout``, which re-exports it: analysis imports no
scalelab, so the owner sits here)::

    <sweep dir>/                    <root>/<sweep name>, root DEFAULT_ROOT unless given
        spec.yaml                   SPEC_FILE      the spec of the latest launch (a copy)
        plan.parquet                PLAN_FILE      one row per planned run, every launch's
        runs.parquet                RUNS_FILE      one row per run (``scalelab collect``)
        runs/                       RUNS_FOLDER    the run directories
            <label>-<run id>/       a run directory (below; the label: model, optimizer)
        ensembles/evals.parquet     ENSEMBLES_FOLDER, ENSEMBLE_EVALS_FILE (``scalelab ensemble``)
        report/                     REPORT_FOLDER  ``scalelab report``'s markdown and figures:
            report.md               LAWS_REPORT_FILE   the laws fitted to the runs
            infinite_compute.md     RECIPES_REPORT_FILE  the recipes compared
            recipes.png, .svg       RECIPES_FIGURE (a stem)
        fit/                        FIT_FOLDER     ``scalelab fit``'s plots
        adaptive/                   ADAPTIVE_FOLDER  an adaptive study's state (``scalelab next``):
            study.yaml              ADAPTIVE_STUDY_FILE       the study's spec
            trajectory.parquet      ADAPTIVE_TRAJECTORY_FILE  one row per look at the target
            round-001.parquet, ...  ``adaptive_round_file``   each round's candidates
            next.yaml               ADAPTIVE_NEXT_FILE        ``scalelab next``'s block

    <run dir>/
        config-input.yaml           CONFIG_INPUT_FILE  the config a job hands the trainer
        config.yaml                 CONFIG_FILE    the resolved config, with the run id
        status.json                 STATUS_FILE    state, steps done, ...
        meta.json                   META_FILE      device and environment
        metrics.parquet, evals.parquet, norms.parquet
                                    RECORD_TABLES, record_file(table); part files of an
                                    unfinished run under ``<table>/part-*.parquet``
        manifest.json               MANIFEST_FILE  size and sha256 of a finished run's records
        checkpoint/                 CHECKPOINT_FOLDER
        job.log                     JOB_LOG        a local job's output

``runs_file`` and the other functions join a sweep directory and a name, nothing more;
which runs table is fresh is ``scalelab.sweep.view.collect.runs_table_stale``'s rule.
"""

from __future__ import annotations

from pathlib import Path

__all__ = [
    "ADAPTIVE_FOLDER",
    "ADAPTIVE_NEXT_FILE",
    "ADAPTIVE_STUDY_FILE",
    "ADAPTIVE_TRAJECTORY_FILE",
    "BLOCK_COLUMN",
    "CHECKPOINT_FOLDER",
    "CONFIG_FILE",
    "CONFIG_INPUT_FILE",
    "DEFAULT_ROOT",
    "ENSEMBLES_FOLDER",
    "ENSEMBLE_EVALS_FILE",
    "EVALS_FILE",
    "FIT_FOLDER",
    "JOB_LOG",
    "LAWS_REPORT_FILE",
    "MANIFEST_FILE",
    "META_FILE",
    "METRICS_FILE",
    "NORMS_FILE",
    "PLAN_FILE",
    "RECIPES_FIGURE",
    "RECIPES_REPORT_FILE",
    "RECORD_TABLES",
    "REPORT_FOLDER",
    "RUNS_FILE",
    "RUNS_FOLDER",
    "SPEC_FILE",
    "STATUS_FILE",
    "adaptive_round_file",
    "ensemble_evals_file",
    "plan_file",
    "record_file",
    "report_folder",
    "run_dirs_folder",
    "runs_file",
    "spec_file",
]

DEFAULT_ROOT = "runs"
"""Where sweep directories (and a lone ``scalelab train``'s run directory) go when neither
``--root``, $SCALELAB_ROOT nor the spec's ``launcher.root`` says: ``./runs/<sweep name>``."""

# --- the sweep directory ---------------------------------------------------------------
SPEC_FILE = "spec.yaml"
"""The copy of the spec of the sweep's latest launch (its ``in_spec`` runs: ``collect``)."""
PLAN_FILE = "plan.parquet"
"""The sweep's plan, rows of every plan launched into the directory."""
RUNS_FILE = "runs.parquet"
"""The runs table, one row per run, written by ``scalelab collect``."""
RUNS_FOLDER = "runs"
"""The folder of a sweep directory that holds its run directories."""
ENSEMBLES_FOLDER = "ensembles"
"""The folder of ``scalelab ensemble``'s output."""
ENSEMBLE_EVALS_FILE = "evals.parquet"
"""The ensembles' evals, in ``ENSEMBLES_FOLDER``."""
REPORT_FOLDER = "report"
"""Where ``scalelab report`` writes its markdown and figures."""
LAWS_REPORT_FILE = "report.md"
"""The report of the laws fitted to the runs (``analysis.report.report``), in REPORT_FOLDER."""
RECIPES_REPORT_FILE = "infinite_compute.md"
"""The recipes report (``analysis.report.infinite_compute_md``), in REPORT_FOLDER."""
RECIPES_FIGURE = "recipes"
"""The stem of the recipes figure (``.png`` and ``.svg``), in REPORT_FOLDER."""
FIT_FOLDER = "fit"
"""Where ``scalelab fit`` writes its plots (without ``--out``)."""
ADAPTIVE_FOLDER = "adaptive"
"""An adaptive study's state (study, next runs, trajectory: ``scalelab.adaptive.record``)."""
ADAPTIVE_STUDY_FILE = "study.yaml"
"""The adaptive study's spec, in ADAPTIVE_FOLDER (read back by ``scalelab next SWEEP_DIR``)."""
ADAPTIVE_TRAJECTORY_FILE = "trajectory.parquet"
"""The adaptive loop's trajectory, in ADAPTIVE_FOLDER (read back to append each round)."""
ADAPTIVE_NEXT_FILE = "next.yaml"
"""``scalelab next``'s block (its default ``-o``), in ADAPTIVE_FOLDER."""
BLOCK_COLUMN = "block"
"""The plan column naming each run's block (absent without blocks)."""

# --- a run directory -------------------------------------------------------------------
CONFIG_INPUT_FILE = "config-input.yaml"
"""The config a job hands the trainer (``scalelab.sweep.run.job``)."""
CONFIG_FILE = "config.yaml"
"""A run's resolved config, with its ``run_id`` and ``run_id_full``."""
STATUS_FILE = "status.json"
"""A run's state (``scalelab.store.status``)."""
META_FILE = "meta.json"
"""A run's device and environment, written as it starts."""
MANIFEST_FILE = "manifest.json"
"""Size and sha256 of a finished run's record files (and of each checkpoint's files)."""
CHECKPOINT_FOLDER = "checkpoint"
"""A run's checkpoints, one ``step-<9 digits>`` folder each."""
JOB_LOG = "job.log"
"""A local job's stdout and stderr."""
RECORD_TABLES = ("metrics", "evals", "norms")
"""A run's tidy record tables: ``<table>.parquet`` once finished, part files before."""
METRICS_FILE = "metrics.parquet"
EVALS_FILE = "evals.parquet"
NORMS_FILE = "norms.parquet"


def record_file(table: str) -> str:
    """The compacted file of a record table: ``evals`` -> ``evals.parquet``."""
    return f"{table}.parquet"


def spec_file(sweep_dir: str | Path) -> Path:
    return Path(sweep_dir) / SPEC_FILE


def plan_file(sweep_dir: str | Path) -> Path:
    return Path(sweep_dir) / PLAN_FILE


def runs_file(sweep_dir: str | Path) -> Path:
    return Path(sweep_dir) / RUNS_FILE


def run_dirs_folder(sweep_dir: str | Path) -> Path:
    return Path(sweep_dir) / RUNS_FOLDER


def adaptive_round_file(sweep_dir: str | Path, index: int) -> Path:
    """Round ``index``'s record of an adaptive study (``round-001.parquet``; 0: the seed design)."""
    return Path(sweep_dir) / ADAPTIVE_FOLDER / f"round-{index:03d}.parquet"


def ensemble_evals_file(sweep_dir: str | Path) -> Path:
    return Path(sweep_dir) / ENSEMBLES_FOLDER / ENSEMBLE_EVALS_FILE


def report_folder(sweep_dir: str | Path) -> Path:
    return Path(sweep_dir) / REPORT_FOLDER
