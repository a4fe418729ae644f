"""The package version, in a module of its own so every layer can name it without importing the facade."""
__version__ = "0.1.0"  # keep in step with pyproject.toml (a test checks)
