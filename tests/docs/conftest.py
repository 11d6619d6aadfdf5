"""The documentation site: its pages generated from the code, and the site built from them.

The page builders are the `_gen` package in docs/, which `docs/gen_pages.py` imports from there at
build time; the tests import it the same way.
"""

from __future__ import annotations

import sys

from tests.tools import ROOT

DOCS = ROOT / "docs"
if str(DOCS) not in sys.path:
    sys.path.insert(0, str(DOCS))
