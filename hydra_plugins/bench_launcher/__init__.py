"""laplace-bench's Hydra launcher plugin: submitit's Slurm launcher that reports on its jobs
(Hydra finds plugins only in this namespace)."""
