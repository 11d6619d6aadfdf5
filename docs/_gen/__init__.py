"""Builders of the documentation pages that are generated from the code at build time.

Each module turns one source of truth (the experiment schema, the CLI, the exporter, the BSO
server, the benchmark results) into Markdown strings; `docs/gen_pages.py` writes them into the
site and `tests/docs` checks that nothing in those sources is left out.
"""
