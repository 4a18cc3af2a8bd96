"""Curvature of the log joint (GGN, empirical Fisher) as structure classes behind one interface
(:mod:`bench.curvature.base`), computed by a flat-parameter or a curvlinops backend."""
