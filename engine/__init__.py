"""omnigraph engine: the fenced embedded graph engine over Lance datasets (format 5)."""

__version__ = "0.1.0"
