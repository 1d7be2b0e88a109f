"""Sweeps, in four stages, each a subpackage that imports only the ones before it
(docs/architecture.md):

1. ``spec``: the YAML file, checked (``spec.load.load_spec``);
2. ``plan``: every run of it (``plan.expand.expand``), pure;
3. ``run``: launch, locks, jobs, backends (``run.launch.execute``);
4. ``view``: render, status, collect, explain.

Tuning lives above this package, in ``scalelab.tune``. The packages re-export nothing, so
importing one stage never loads the others.
"""
