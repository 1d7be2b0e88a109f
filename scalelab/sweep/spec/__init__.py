"""Stage 1, the spec: YAML with line numbers (``located``), config keys (``keys``), derive
rules (``rules``), sections (``sections``), launcher keys (``launcher``), blocks
(``blocks``) and the loader that checks it all (``load.load_spec``). Pure; imports nothing
of the later stages (docs/architecture.md)."""
