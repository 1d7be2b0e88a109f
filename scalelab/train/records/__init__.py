"""A run's tidy records: ``records`` (metrics, evals and norms as parquet parts, compacted
at the end), ``norms`` (per-layer norm rows), ``record_files`` / ``record_gaps`` /
``records_check`` (corrupt record files: detection, lost steps, the quick look of status
and collect) and ``records_manifest`` (a finished run's manifest of its record files).

Imports only the folders before it (``checkpoint.manifest``: one hashing engine).
Re-exports nothing.
"""
