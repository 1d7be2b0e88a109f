"""Tables in and out of a sweep directory: its layout (``layout``: the names of its files
and folders), the runs table and its fit-ready rows (``runs``), ``--where`` selections
(``select``), damaged-parquet checks (``safe_parquet``), lazy scans of every run's records
(``records_scan``), the ensemble groups the recipe analysis uses (``ensemble_groups``),
and published constants and data (``published``).

The first folder of ``analysis``: it imports only the base modules (``analysis.errors``,
``analysis.atomic``, ``analysis.progress``). Nothing is re-exported here, so importing one
module (e.g. ``analysis.tables.layout`` from scalelab's store) loads no scipy.
"""
