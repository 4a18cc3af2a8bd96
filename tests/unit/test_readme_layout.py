"""The README's Layout table names every folder of the package and only those, and every file
path it names in a folder's row exists (the table once named a ``methods/base.py`` that had
gone)."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def layout_rows() -> dict[str, str]:
    """Folder (first cell, without slash) -> the rest of its row, from README's Layout table."""
    text = (ROOT / "README.md").read_text()
    section = text.split("\n## Layout\n", 1)[1].split("\n## ", 1)[0]
    rows = {}
    for line in section.splitlines():
        match = re.match(r"\| ((?:`[a-z_]+/`(?:, )?)+) \| (.*) \|$", line)
        if match:
            for folder in re.findall(r"`([a-z_]+)/`", match.group(1)):
                rows[folder] = match.group(2)
    return rows


def test_the_layout_table_names_every_package_folder_and_no_other():
    package = {p.name for p in (ROOT / "bench").iterdir()
               if p.is_dir() and not p.name.startswith((".", "__"))}
    assert set(layout_rows()) == package


def test_every_file_a_row_names_exists_in_its_folder():
    missing = []
    for folder, text in layout_rows().items():
        for name in re.findall(r"`((?:[a-z_]+/)*[a-z_]+\.py)`", text):
            candidates = [ROOT / "bench" / folder / name, ROOT / "bench" / name]
            if not any(path.exists() for path in candidates):
                missing.append(f"{folder}/: {name}")
    assert missing == []
