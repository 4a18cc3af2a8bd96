"""laplace-bench: reproducible benchmark harness for Laplace approximations."""

__version__ = "0.1.0"
