"""Reports: records -> pandas -> one generic renderer (Markdown, CSV, LaTeX, PNG) per spec.

Public entry points: :class:`ArtifactSpec` (what a report shows), the verdict rules
(:class:`PrintedDigits`, :class:`Tolerance`, :class:`Factor`, :class:`Interval`),
:func:`render_report` (write one report and its ``<artifact>.summary.json``),
:func:`write_index` (``reports/README.md``: scoreboard and index) and :func:`write_overview`
(``README.md``, ``FINDINGS.md`` and ``timing.md``, from the summaries).
"""

from bench.reporting.index import write_index, write_overview
from bench.reporting.render import render_report
from bench.reporting.spec import Anchor, ArtifactSpec
from bench.reporting.verdicts import Factor, Interval, PrintedDigits, Tolerance, VerdictRule

__all__ = [
    "Anchor", "ArtifactSpec", "Factor", "Interval", "PrintedDigits", "Tolerance", "VerdictRule",
    "render_report", "write_index", "write_overview",
]
