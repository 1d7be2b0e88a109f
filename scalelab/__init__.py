"""scalelab: a scaling-law lab for data-constrained LLM pretraining.

spec -> plan -> launch -> train -> store -> collect; see README.md, "Concepts".
"""

__version__ = "0.1.0"
