"""Small-network machinery: a functional MLP over flat parameters, training, curvature."""
