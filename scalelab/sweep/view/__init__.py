"""Stage 4, views of a sweep: the plan as text or tables (``render``, ``plan_view``), run
states (``status``), the collected records (``collect``, ``current``) and ``explain``.
Imports the earlier stages, never the reverse (docs/architecture.md)."""
