"""The deskbench command line: `app.py` assembles one module per command group."""

from deskbench.cli.app import app, main

__all__ = ["app", "main"]
