"""Causes of the reports, computed from the records: one module per paper.

A report spec (:mod:`bench.reporting.specs`) says what is judged and in which words: its rows,
columns, claims and notes. The functions here read the records (or their means and summaries
over seeds) and return what a report prints beside a verdict that is not ``agrees``: an
anchor's or a cell's cause, the reason a cell is ``not comparable``, a protocol claim's
description of the fits, and the statistics and record selectors those sentences quote, with
the row names and thresholds they share with the specs. Nothing here is registered or
rendered on its own; the specs import what they use, and no module here imports a spec.
"""
