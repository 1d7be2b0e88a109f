"""The names of a sweep directory's parts and of a run directory's files, for scalelab:
``analysis.tables.layout`` owns them (analysis imports no scalelab, so the owner sits
there; its docstring draws both directories) and this module re-exports every one, so the
sweep (which writes them), a run (``scalelab.train``) and the commands import one place.
"""

from __future__ import annotations

from analysis.tables.layout import (
    ADAPTIVE_FOLDER,
    ADAPTIVE_NEXT_FILE,
    ADAPTIVE_STUDY_FILE,
    ADAPTIVE_TRAJECTORY_FILE,
    BLOCK_COLUMN,
    CHECKPOINT_FOLDER,
    CONFIG_FILE,
    CONFIG_INPUT_FILE,
    DEFAULT_ROOT,
    ENSEMBLE_EVALS_FILE,
    ENSEMBLES_FOLDER,
    EVALS_FILE,
    FIT_FOLDER,
    JOB_LOG,
    LAWS_REPORT_FILE,
    MANIFEST_FILE,
    META_FILE,
    METRICS_FILE,
    NORMS_FILE,
    PLAN_FILE,
    RECIPES_FIGURE,
    RECIPES_REPORT_FILE,
    RECORD_TABLES,
    REPORT_FOLDER,
    RUNS_FILE,
    RUNS_FOLDER,
    SPEC_FILE,
    STATUS_FILE,
    __all__,
    adaptive_round_file,
    ensemble_evals_file,
    plan_file,
    record_file,
    report_folder,
    run_dirs_folder,
    runs_file,
    spec_file,
)

__all__ = list(__all__)
