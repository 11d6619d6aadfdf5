"""Every generated page of the site, by its path under docs/: what `docs/gen_pages.py` writes."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from .benchmarks import benchmark_pages
from .bso_http import bso_http_page
from .cli import cli_page
from .experiment_file import experiment_file_page
from .prometheus import prometheus_page

#: The generated reference pages: site path -> builder (the repository root in, Markdown out).
REFERENCE: dict[str, Callable[[Path], str]] = {
    "reference/experiment-file.md": lambda root: experiment_file_page(root=root),
    "reference/cli.md": lambda root: cli_page(),
    "reference/prometheus.md": lambda root: prometheus_page(),
    "reference/bso-http-api.md": lambda root: bso_http_page(),
}


def all_pages(root: Path) -> dict[str, str]:
    """{path under docs/: content} of every generated file, built from the tree at `root`."""
    pages = {path: build(root) for path, build in REFERENCE.items()}
    pages.update(benchmark_pages(root))
    pages.update(shipped_files(root))
    return pages


#: Files of the repository outside docs/ that the site serves for download: site path -> path.
SHIPPED = {"how-to/basht-dashboard.json": "deploy/grafana/basht-dashboard.json"}


def shipped_files(root: Path) -> dict[str, str]:
    """Files the pages link to for download, copied from where the repository keeps them."""
    return {path: (root / source).read_text(encoding="utf-8") for path, source in SHIPPED.items()}
