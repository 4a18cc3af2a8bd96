"""Subnetwork linearised Laplace (Raha, Khare, Patra): selectors, surrogates, data, metrics."""
