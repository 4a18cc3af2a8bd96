"""laplace-bench's Hydra sweeper plugin (Hydra finds plugins only in this namespace)."""
