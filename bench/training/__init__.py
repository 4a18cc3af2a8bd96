"""Training loops: the MAP network, the authors' base network, refits."""
