"""Variational inference written here: natural-gradient VI with the GGN (VOGGN, LGVA, OGGN)."""
