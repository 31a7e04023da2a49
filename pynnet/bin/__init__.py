"""Command-line programs: thin wrappers over the library (console scripts in pyproject.toml)."""
