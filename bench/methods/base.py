"""The method contract, named where the method classes live.

The contract itself is :mod:`bench.contracts.method` (with the capability protocols of
:mod:`bench.contracts.capabilities`); building a method from its config node is
:mod:`bench.harness.method_nodes`. This module keeps the old import path working.
"""

from bench.contracts.capabilities import HoldsUnreadTensors, StoredTensors
from bench.contracts.method import Method, Predictive
from bench.harness.method_nodes import (
    VARIANTS_KEY,
    instantiate_method,
    merged_method_node,
    method_arguments,
    method_class,
    method_variants,
)

__all__ = ["VARIANTS_KEY", "HoldsUnreadTensors", "Method", "Predictive", "StoredTensors",
           "instantiate_method", "merged_method_node", "method_arguments", "method_class",
           "method_variants"]
