"""Generates the reference and benchmark pages from the code at build time (mkdocs-gen-files runs
this script; the builders live in docs/_gen/ so that tests/docs can run them too).

The pages document this checkout: its root goes first on sys.path, ahead of any installed Basht.
"""

from __future__ import annotations

import sys
from pathlib import Path

import mkdocs_gen_files

DOCS = Path(__file__).resolve().parent
ROOT = DOCS.parent
sys.path[:0] = [p for p in (str(ROOT), str(DOCS)) if p not in sys.path]  # once per `mkdocs serve`

from _gen.pages import all_pages  # noqa: E402  (needs the paths above)

for path, text in all_pages(ROOT).items():
    with mkdocs_gen_files.open(path, "w") as page:
        page.write(text)
