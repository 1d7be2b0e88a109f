"""The run directory on disk: atomic writes, status, records (README.md, "Concepts")."""
