"""Hyperparameter tuning over a sweep spec: the certified coordinate search of Kim et al.
2025 (arXiv 2509.14786; ``coordinate``) and the study that launches it round by round
(``study.tune``). Sits above ``scalelab.sweep`` (docs/architecture.md)."""
