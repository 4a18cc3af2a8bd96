"""Variational inference written here: natural-gradient VI with the GGN (VOGGN, LGVA, OGGN), and
the reference Gaussian VI on pyro that checks them."""
