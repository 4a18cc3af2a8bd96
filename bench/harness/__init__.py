"""Job plumbing shared by every experiment.

Records, provenance, overrides, errors, random generators and timing.
"""
