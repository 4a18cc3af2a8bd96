"""The job step of each family of tasks, shared by its tasks: data -> method -> predictive ->
metrics -> cells.

* :mod:`bench.jobs.regression_runner`: network regression (SSLA Tables 2 and 4, Figure 2);
* :mod:`bench.jobs.classification_runner`: image classification methods on a stored MAP network
  (Laplace Redux Tables 2-4, Figure 9; Generalized Laplace Figures 3-5 with its own predict
  step);
* :mod:`bench.jobs.replication_runner`: replications on data drawn from a network (subnetwork
  Figures 1 and 2);
* :mod:`bench.jobs.toy_runner`: the data and record steps of the GGN thesis' toy tasks
  (Figures 5.2-5.5).

A task is a short function over one of these; tasks never import each other.
"""
