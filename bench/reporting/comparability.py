"""When our number and the paper's measure different things, declared once for every report.

- **Seconds on other hardware.** A cell or anchor a spec lists in ``timed`` (seconds, or a
  ratio of seconds) is comparable only when every record behind it ran on the hardware the
  paper timed on (:data:`PAPER_HARDWARE`, a GPU for the papers here); otherwise it is "not
  comparable", with both numbers shown.
- **Averages over other sets.** A column a spec lists in ``averaged_sets`` (the sets the
  paper averages over) is comparable only when the records averaged the same sets
  (``fitted.ood_sets``).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

Records = list[dict[str, Any]]
# Device prefix of the records the papers' seconds can be compared with.
PAPER_HARDWARE = "cuda"


def hardware_reason(records: Records) -> str:
    """Why seconds (or their ratios) of ``records`` are not the paper's, "" when every record
    ran on the paper's hardware."""
    devices = sorted({str(r.get("device", "unknown")) for r in records})
    if devices and all(device.startswith(PAPER_HARDWARE) for device in devices):
        return ""
    return (f"hardware: seconds measured on {'/'.join(devices) or 'unknown'} (records' "
            "device), the paper's on a GPU; seconds and their ratios are judged on CUDA "
            "records only")


def averaged_sets_reason(paper_sets: tuple[str, ...]) -> Callable[[Records], str]:
    """Reason of a column averaging over sets: "" when the records averaged exactly
    ``paper_sets`` (``fitted.ood_sets``), else both lists."""
    def reason(records: Records) -> str:
        ours = sorted({str(name) for r in records
                       for name in (r.get("fitted") or {}).get("ood_sets") or []})
        if ours == sorted(paper_sets):
            return ""
        return (f"other sets: ours averages {', '.join(ours) or 'no set recorded'} "
                f"(records' fitted.ood_sets), the paper's {', '.join(paper_sets)}")

    return reason
