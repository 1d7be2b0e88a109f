"""Published constants and data the fits are checked against (Hoffmann et al. 2022, Besiroglu
et al. 2024, Muennighoff et al. 2023, Porian et al. 2024, Kim et al. 2025).

Every number here is a published fact, cited where it is declared; tests and notebooks
import them from here rather than retyping them.
"""

from __future__ import annotations

import math
from importlib import resources

import polars as pl

__all__ = [
    "EPOCH",
    "EPOCH_OBJECTIVE_FLAT",
    "EPOCH_SE",
    "HOFFMANN",
    "HOFFMANN_EXPONENTS",
    "HOFFMANN_UNROUNDED",
    "KIM",
    "MUENNIGHOFF",
    "MUENNIGHOFF_CHECKS",
    "PORIAN_EXPONENTS",
    "load_epoch_chinchilla",
    "load_muennighoff_c4",
    "load_porian_isoflops",
]

HOFFMANN = {"A": 406.4, "B": 410.7, "E": 1.69, "alpha": 0.34, "beta": 0.28}
"""Hoffmann et al. 2022, eq. 10 (rounded)."""

HOFFMANN_UNROUNDED = {
    "A": 406.401,
    "B": 410.723,
    "E": 1.69337,
    "alpha": 0.33917084,
    "beta": 0.2849083,
}
"""Hoffmann et al.'s constants unrounded (Hoffmann et al. 2022, arXiv 2203.15556)."""

HOFFMANN_EXPONENTS = {
    "approach 1": {"a": (0.50, (0.488, 0.502)), "b": (0.50, (0.501, 0.512))},
    "approach 2": {"a": (0.49, (0.462, 0.534)), "b": (0.51, (0.483, 0.529))},
    "approach 3": {"a": (0.46, (0.454, 0.455)), "b": (0.54, (0.542, 0.543))},
}
"""Hoffmann et al. 2022, Table 2: N_opt ∝ C^a, D_opt ∝ C^b per approach (1: minimum over
training curves, 2: isoFLOP profiles, 3: parametric loss), value and (10th, 90th)
percentile from 100 bootstrap resamples of 80% of their data: 80% intervals, not 95%."""

EPOCH = {"A": 482.01, "B": 2085.43, "E": 1.8169, "alpha": 0.3478, "beta": 0.3658}
"""Besiroglu et al. 2024 (arXiv 2404.10102), Table 1: refit of the 240 digitised points."""

EPOCH_SE = {"A": 124.52, "B": 1293.28, "E": 0.0257, "alpha": 0.0154, "beta": 0.0206}
"""Their bootstrap standard errors (4,000 resamples)."""

EPOCH_OBJECTIVE_FLAT = 0.0010183
"""Huber objective (delta 1e-3, summed) at the full-grid optimum A 477.83, B 2143.2,
E 1.8172, alpha 0.3473, beta 0.3672 (our recomputation on Besiroglu et al.'s 240 points with
Epoch's 4,500-start grid, not a published number); Epoch's own point scores
0.0010186 and differs from it along the flat A, B valley."""

MUENNIGHOFF = {
    "A": math.exp(6.255414),
    "B": math.exp(7.3049974),
    "E": math.exp(0.6254804),
    "alpha": 0.3526596,
    "beta": 0.3526596,
    "R_D": 15.387756,
    "R_N": 5.309743,
}
"""Muennighoff et al. 2023 (arXiv 2305.16264), huggingface/datablations README constants."""

MUENNIGHOFF_CHECKS = ((6.34e9, 242e9, 25e9, 2.22564), (8.67e9, 178e9, 25e9, 2.22696))
"""(N, D, U, L) check values from the datablations README."""

KIM = {
    # Kim et al. 2025, "Pre-training under infinite compute" (arXiv 2509.14786) and its code,
    # marin-community/marin experiments/data_efficiency/.
    "model_sizes_b": (0.15, 0.3, 0.6, 1.4),  # N in billions, as the fits use it
    "seed_tokens": (209_715_200, 419_430_400, 838_860_800, 1_677_721_600),
    "standard_200m": (3.83752, 3.78538, 3.74974, 3.76432),  # WD 0.1, epochs/LR tuned
    "standard_reference": 3.74974,  # the "1x" loss: best standard recipe at 200M
    "regularized_asymptote": 3.43,  # L(N) = 0.05/N^1.02 + 3.43 (code constant)
    "ensemble_asymptotes_200m": (3.4949, 3.2730, 3.2122, 3.1740),  # K -> inf per N
    "joint_asymptote": 3.17,  # N, K -> inf (paper); refit gives 0.016/N^1.59 + 3.169
    "joint_multiplier": 5.17,  # data-efficiency of 3.17 over the standard recipe (paper)
    "regularized_multiplier": 2.29,  # data-efficiency of 3.43 (paper, Section 5)
    "distilled_ensemble_student": 3.3635,
    "self_distilled": 3.43243,
}


def load_epoch_chinchilla(filtered: bool = True) -> pl.DataFrame:
    """Epoch's digitised Chinchilla points as (N, D, U, C, loss); D = C/(6N), U = D.

    ``filtered`` drops the 5 highest losses, leaving Epoch's 240 points.
    """
    path = resources.files("analysis") / "data" / "epoch_chinchilla_svg_extracted_data.csv"
    with resources.as_file(path) as p:
        raw = pl.read_csv(p)
    df = raw.select(
        pl.col("Model Size").cast(pl.Float64).alias("N"),
        pl.col("Training FLOP").cast(pl.Float64).alias("C"),
        pl.col("loss").cast(pl.Float64),
    ).with_columns((pl.col("C") / (6.0 * pl.col("N"))).alias("D"))
    df = df.with_columns(pl.col("D").alias("U")).select("N", "D", "U", "C", "loss")
    if filtered:
        df = df.sort("loss").head(df.height - 5)
    return df


def load_muennighoff_c4() -> pl.DataFrame:
    """Muennighoff et al.'s 182 C4 runs as (name, N, D, U, loss): the runs behind their
    R_D* = 15.39 and R_N* = 5.31 (Muennighoff et al. 2023, arXiv 2305.16264), read from
    huggingface/datablations ``utils/parametric_fit.ipynb`` (the data cell with outliers
    removed; N from its parameter map, D and U in tokens parsed from each run's name).
    The run names follow the authors' ``<params><tokens><unique tokens>`` convention."""
    path = resources.files("analysis") / "data" / "muennighoff_c4_182_runs.csv"
    with resources.as_file(path) as p:
        return pl.read_csv(p, schema={"name": pl.String, "N": pl.Float64, "D": pl.Float64,
                                      "U": pl.Float64, "loss": pl.Float64})


PORIAN_EXPONENTS = {
    "rw-base-long-kaplan-kaplan-train": 0.8337679322841748,
    "rw-base-long-kaplan-standard-val": 0.7008992037256913,
    "rw-base-short-kaplan-standard-val": 0.6035277580839369,
    "rw-base-short-chinchilla-standard-val": 0.5714248897446623,
    "rw-tuned-short-const-standard-val": 0.49702879549161855,
    "rw-base-long-kaplan-attention-train": 0.7159159360671492,
    "rw-base-short-kaplan-attention-train": 0.6240122344160747,
    "rw-base-short-chinchilla-attention-train": 0.5778107104483554,
    "rw-tuned-short-const-attention-train": 0.5040658333609918,
    "rw-tuned-long-const-kaplan-train": 0.7080587881192976,
    "owt2-base-long-kaplan-kaplan-train": 0.8699922654078757,
    "owt2-base-long-kaplan-standard-val": 0.699987265802479,
    "owt2-base-short-kaplan-standard-val": 0.6016112484346736,
    "owt2-base-short-chinchilla-standard-val": 0.5688896641379275,
    "owt2-tuned-short-const-standard-val": 0.5184058116244237,
}
"""Porian et al. 2024 ("Resolving Discrepancies in Compute-Optimal Scaling of Language
Models", arXiv 2406.19146): the exponent a of N*(C) ∝ C^a of each of their 15
configurations (dataset-hparams-warmup-decay-param count-loss split), fitted by the
authors' own procedure: per budget, the argmin of an Akima interpolation of log loss over
log N, then an unweighted least-squares line of log N* on log C (``fit_results["basic"]
["n_exponent"]`` of formll/resolving-scaling-law-discrepancies, ``data/summary_df*.pickle.xz``)."""


def load_porian_isoflops() -> pl.DataFrame:
    """Porian et al.'s isoFLOP points of their 15 configurations as (config, C, N, D, loss):
    12 budgets (11 in three configurations) from 1.25e16 to 2.56e19 FLOPs, 5-16 model sizes
    each, the loss of each model read off its training curve at the budget (the authors'
    ``optimal_pairs`` ``n_vals``/``loss_vals``); D = C / (6 N), N as the configuration counts
    it. ``PORIAN_EXPONENTS`` holds the authors' exponent of each (analysis/data/README.md)."""
    path = resources.files("analysis") / "data" / "porian2024_isoflops.csv"
    with resources.as_file(path) as p:
        df = pl.read_csv(p, schema={"config": pl.String, "C": pl.Float64, "N": pl.Float64,
                                    "loss": pl.Float64})
    return df.with_columns((pl.col("C") / (6.0 * pl.col("N"))).alias("D")).select("config", "C", "N", "D", "loss")
