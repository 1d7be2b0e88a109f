"""Stage 2, the plan: ``expand.expand`` turns a ``Spec`` into a ``table.Plan`` (one frozen
RunConfig and one row per run): the grid (``grid``), blocks (``blocks``), derive rules
(``rule_env``), per-run launchers (``resources``), dataset facts (``datasets``) and the GPU
memory check (``gpu_memory``). Imports only the spec stage (docs/architecture.md)."""
