"""Thin command-line entry points (``python -m bench.run`` and friends delegate here)."""
