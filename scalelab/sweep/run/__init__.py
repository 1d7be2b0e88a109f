"""Stage 3, running a plan: ``start`` (a sweep directory with its spec.yaml, and launching
a plan, staged when it has distillation students: what sweep, demo, tune and the adaptive
loop call), ``launch`` (decide and submit), ``lock`` (one owner per run),
``job`` (what a job runs), ``observe`` (a run's state), ``snapshot`` (code at submit) and
the ``backends`` (debug, local, Slurm via submitit). Imports the spec and plan stages
(docs/architecture.md)."""
