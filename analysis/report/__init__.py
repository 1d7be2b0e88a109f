"""Reports written to disk: the fit report of a runs table (``report``), a sweep's
infinite-compute report as markdown (``infinite_compute_md``) and the command's whole
report of a sweep directory (``sweep_report``).

The last folder of ``analysis``: it may import every folder before it. Nothing is
re-exported here.
"""
