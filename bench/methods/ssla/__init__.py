"""SSLA and ASSLA: the algorithm on any LaplaceModel, adapters for conjugate models and networks."""
