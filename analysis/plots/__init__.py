"""Figures, the one folder of ``analysis`` that imports matplotlib: the shared style
(``style``), the report's figures and ``save_figure`` (``plots``), loss curves
(``curves``), the isoFLOP figure (``isoflop``), the recipes figure (``recipes``), the
transfer figure (``transfer``: loss against a hyperparameter and its optimum against size),
the notebooks' ``show`` (``notebook_figures``) and their parameters, read from the command
line or the environment (``notebook_params``).

Imports only the folders before it and the base modules. Nothing is re-exported here.
"""
