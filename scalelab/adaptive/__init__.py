"""The scalelab side of adaptive scaling studies and recipe comparisons (the
method: ``analysis.adaptive``, ``analysis.recipes.compare`` and docs/adaptive.md).

One concept per module:

- ``study``: a sweep spec's grid as an ``analysis.adaptive.CandidateSpace``, each
  candidate run keyed to its run id, cost and plan row;
- ``observed``: a sweep's runs table (``collect``) read against a study: finished runs with
  their loss, in-flight and failed ones, candidates never launched, what was spent;
- ``block``: chosen runs written as a spec with one ``blocks:`` entry (a ``zip``) that
  ``scalelab sweep`` launches and that expands to exactly those runs;
- ``source``: SWEEP (a sweep directory or a spec file) -> the study's spec and sweep
  directory (the study's spec is kept as ``<sweep>/adaptive/study.yaml``);
- ``record``: each round's candidate table and the trajectory as parquet under
  ``<sweep>/adaptive/``, written atomically;
- ``loop``: ``run_adaptive_sweep``, the seed design then rounds of ``plan_next``, every
  launch through ``scalelab.sweep.run.launch.execute``;
- ``recipe_cells``: per recipe, the seed replicates of each size's best cell (the input
  of ``analysis.recipes.compare.compare_recipes``);
- ``targets``: ``--target`` / ``--recipe``: the study's recipes as slices of its grid and
  the ``analysis.adaptive.targets`` target (E, ranking, multiplier), and its one line;
- ``membership``: whether a launched spec is runs of the sweep's recorded study (then
  ``<sweep>/spec.yaml`` stays the study's).

Nothing is re-exported here: import the module you need (the CLI imports lazily).
"""
