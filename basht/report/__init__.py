"""What the user sees: console tables, live progress, results.json."""

from basht.report.console import print_result, result_tables, runs_table
from basht.report.results import build_summary, write_results_json

__all__ = ["build_summary", "print_result", "result_tables", "runs_table", "write_results_json"]
