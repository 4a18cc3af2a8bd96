"""Laplace approximations: laplace-torch adapters, linearised (GGN) Laplace, subnetworks."""
