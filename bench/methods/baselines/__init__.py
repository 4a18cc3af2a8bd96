"""Non-Laplace baselines: plug-in, deep ensemble, HMC, VI, split and bootstrap intervals."""
