"""Figures, the one folder of ``analysis`` that imports matplotlib: the shared style
(``style``), the report's figures and ``save_figure`` (``plots``), loss curves
(``curves``), the isoFLOP figure (``isoflop``), the recipes figure (``recipes``), the
transfer figure (``transfer``: loss against a hyperparameter and its optimum against size)
and the notebooks' ``show`` (``notebook_figures``).

Imports only the folders before it and the base modules. Nothing is re-exported here.
"""
