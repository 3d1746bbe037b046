"""MkDocs hook: the site's "Developing bench" page is the repository's CONTRIBUTING.md itself.

`docs/development.md` holds a link to CONTRIBUTING.md, which reads right wherever the repository is
read (GitHub, an editor); the site shows the guide in its place, from the one file, so there is no
copy to keep in step and no include line to show raw outside the site.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

GUIDE = Path(__file__).resolve().parents[2] / "CONTRIBUTING.md"
PAGE = "development.md"


def on_page_read_source(page: Any, config: Any) -> str | None:
    return GUIDE.read_text(encoding="utf-8") if page.file.src_uri == PAGE else None
