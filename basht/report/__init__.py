"""What the user sees: console tables, live progress, results.json, comparisons, plots and HTML."""

from __future__ import annotations

from typing import TYPE_CHECKING

from basht._lazy import lazy_exports

if TYPE_CHECKING:
    from basht.report.compare import compare_rows, compare_table
    from basht.report.comparison import Comparison, load_comparison
    from basht.report.console import print_result, result_tables, runs_table
    from basht.report.html import write_comparison_report, write_run_report
    from basht.report.plots import write_comparison_plots, write_run_plots
    from basht.report.results import build_summary, write_results_json

__all__ = [
    "Comparison",
    "build_summary",
    "compare_rows",
    "compare_table",
    "load_comparison",
    "print_result",
    "result_tables",
    "runs_table",
    "write_comparison_plots",
    "write_comparison_report",
    "write_results_json",
    "write_run_plots",
    "write_run_report",
]

__getattr__, __dir__ = lazy_exports(__name__)
