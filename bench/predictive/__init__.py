"""Predictive distributions over y: Gaussian, grid and quadrature densities."""
