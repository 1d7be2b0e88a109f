"""Ensembles of independently trained members (Kim et al. 2025, arXiv 2509.14786).

    from scalelab.ensemble import ensemble_nll, evaluate_sweep
    loss = ensemble_nll(logits_KBTV, targets_BT, "logits").mean()   # logit averaging
    table, path = evaluate_sweep("runs/tiny_infinite_compute")         # K = 1..M, held out
"""

from scalelab.ensemble.combine import METHODS, PrefixEnsemble, ensemble_log_probs, ensemble_nll
from scalelab.ensemble.evaluate import ENSEMBLE_SCHEMA, evaluate_group, evaluate_sweep, find_groups
from scalelab.ensemble.load import TrainedRun, load_trained

__all__ = [
    "ENSEMBLE_SCHEMA",
    "METHODS",
    "PrefixEnsemble",
    "TrainedRun",
    "ensemble_log_probs",
    "ensemble_nll",
    "evaluate_group",
    "evaluate_sweep",
    "find_groups",
    "load_trained",
]
