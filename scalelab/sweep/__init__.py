"""Sweeps: spec -> plan -> launch -> status -> collect (README.md, "Concepts").

Spec and plan (pure): ``spec.load_spec``, ``plan.expand``, ``render.render_plan``,
``explain.explain``; tuning: ``tune.tune`` and the certified coordinate search of
Kim et al. 2025 in ``coordinate``. Launch, backends, status and collect live in their
own modules beside these. Import from the submodules; this package re-exports nothing
so that ``import scalelab.sweep.spec`` stays cheap.
"""
