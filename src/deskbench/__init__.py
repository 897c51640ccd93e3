"""deskbench: evaluate AI agents on the desk work of analysts."""

__version__ = "0.1.0"
