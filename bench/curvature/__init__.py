"""Curvature of the log joint (GGN, empirical Fisher) in diagonal, Kronecker and dense forms."""
