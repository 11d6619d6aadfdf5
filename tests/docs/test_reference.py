"""The generated reference leaves nothing out: every experiment key, CLI command and option,
Prometheus metric and BSO route, and every benchmark results file, has its place in the pages.

Each test walks its source of truth on its own (the schema, the click tree, the exporter, the
OpenAPI document, the results folder) and looks for what it finds in the generated Markdown, so a
key or option added to the code fails here until the page shows it.
"""

from __future__ import annotations

import json
import re
from typing import Any

import pytest
import yaml

from tests.tools import ROOT

from _gen import benchmarks, bso_http, cli, experiment_file, prometheus  # isort: skip


def _words(text: str) -> str:
    """Text with its whitespace collapsed, as a table cell holds it."""
    return " ".join(text.split()).replace("|", "\\|")


def _sections(markdown: str) -> dict[str, str]:
    """{heading line without its #s and attributes: the Markdown under it}."""
    found: dict[str, str] = {}
    heading, lines = "", []
    for line in markdown.splitlines():
        if line.startswith("#"):
            found[heading] = "\n".join(lines)
            heading = re.sub(r"\s*\{[^}]*\}\s*$", "", line.lstrip("#").strip())
            lines = []
        else:
            lines.append(line)
    found[heading] = "\n".join(lines)
    return found


def _first_column(section: str) -> list[str]:
    """The first cell of each row of the section's table (without its backticks)."""
    rows = [line for line in section.splitlines() if line.startswith("| `")]
    return [row.split(" | ")[0].removeprefix("| ").strip("`") for row in rows]


# -- the experiment file -------------------------------------------------------------------


@pytest.fixture(scope="module")
def schema() -> dict[str, Any]:
    return experiment_file.experiment_schema()


@pytest.fixture(scope="module")
def experiment_page(schema: dict[str, Any]) -> str:
    return experiment_file.experiment_file_page(schema, ROOT)


def _models(schema: dict[str, Any]) -> dict[str, dict[str, Any]]:
    """Every model of the schema: the experiment itself and each nested one."""
    return {"(top level)": schema, **schema.get("$defs", {})}


def test_every_model_of_the_schema_has_a_section_with_all_its_keys(schema, experiment_page):
    tables = [_first_column(body) for body in _sections(experiment_page).values()]
    for name, model in _models(schema).items():
        keys = list(model.get("properties", {}))
        assert keys in tables, f"no section lists exactly the keys of {name}: {keys}"


def test_every_key_shows_its_description_type_and_default(schema, experiment_page):
    for name, model in _models(schema).items():
        for key, prop in model.get("properties", {}).items():
            row = f"| `{key}` |"
            assert row in experiment_page, f"{name}.{key}"
            if prop.get("description"):
                assert _words(prop["description"]) in experiment_page, f"{name}.{key}"
            if "default" in prop and not isinstance(prop["default"], dict):
                shown = experiment_file.yaml_value(prop["default"])
                assert f"`{shown}`" in experiment_page, f"{name}.{key} default {shown}"
            for value in prop.get("enum", []):
                assert f"`{value}`" in experiment_page, f"{name}.{key} value {value}"


def test_a_key_added_to_a_model_appears_on_the_page(schema):
    grown = json.loads(json.dumps(schema))
    grown["$defs"]["SearchSpec"]["properties"]["brand_new_s"] = {
        "type": "number",
        "exclusiveMinimum": 0,
        "default": 5.0,
        "description": "A key nobody has documented by hand.",
    }
    section = _sections(experiment_file.experiment_file_page(grown))["`search`"]
    assert (
        "| `brand_new_s` | number | `5.0` | > 0 | A key nobody has documented by hand. |" in section
    )


def test_every_field_of_the_experiment_models_has_a_docstring():
    """The field docstrings are the page's descriptions: a new field needs one."""
    from pydantic import BaseModel

    import basht.experiment as module

    models = [
        m
        for m in vars(module).values()
        if isinstance(m, type) and issubclass(m, BaseModel) and m.__module__ == module.__name__
    ]
    assert len(models) > 10
    missing = [
        f"{m.__name__}.{name}"
        for m in models
        for name, field in m.model_fields.items()
        if not field.description
    ]
    assert not missing, f"fields without a docstring under them: {missing}"


def test_nested_blocks_link_to_their_sections(experiment_page):
    for path in ("measure.carbon", "measure.price", "plan.job", "plan.job.stages[]"):
        anchor = experiment_file.anchor(path)
        assert f"](#{anchor})" in experiment_page and f"{{ #{anchor} }}" in experiment_page


# -- the command line ----------------------------------------------------------------------


@pytest.fixture(scope="module")
def cli_page() -> str:
    return cli.cli_page()


def _click_tree() -> list[tuple[str, Any]]:
    """(command path, command) of every visible command, walked here independently."""
    found = []

    def walk(command: Any, path: str) -> None:
        found.append((path, command))
        for name, child in getattr(command, "commands", {}).items():
            if not child.hidden:
                walk(child, f"{path} {name}")

    walk(cli.root_command(), "basht")
    return found


def test_every_command_and_option_is_in_the_reference(cli_page):
    sections = _sections(cli_page)
    tree = _click_tree()
    assert {"basht run", "basht bso serve", "basht bso migrate"} <= {p for p, _ in tree}
    for path, command in tree:
        section = sections.get(f"`{path}`")
        assert section is not None, f"no section for {path}"
        if command.help:
            first = command.help.strip().split("\n\n")[0]
            assert _words(first) in _words(section), path
        for param in command.params:
            if param.hidden:
                continue
            names = cli.param_names(param)
            assert all(f"`{n}`" in section for n in names), f"{path} {names}"
            if getattr(param, "help", None):
                assert _words(param.help) in section, f"{path} {names}"


def test_an_option_row_has_its_type_and_default(cli_page):
    run = _sections(cli_page)["`basht run`"]
    assert "| `--results` | path | `results` |" in run
    assert "| `-q`, `--quiet` | flag | off |" in run
    assert "| `FILE` | path | required |" in run
    runs = _sections(cli_page)["`basht runs`"]
    assert "| `--limit` | integer | `50` | ≥ 1, ≤ 1000000 |" in runs


# -- Prometheus ----------------------------------------------------------------------------


def test_every_exporter_metric_is_in_the_reference():
    page = prometheus.prometheus_page()
    metrics = prometheus.exporter_metrics()
    assert len(metrics) >= 7
    for metric in metrics:
        assert f"| `{metric.name}` | {metric.kind} |" in page
        assert _words(metric.help) in page
        assert all(f"`{label}`" in page for label in metric.labels)
    # Read from the source too: a metric the stand-in data would not bring out still counts.
    source = (ROOT / "basht/report/exporter.py").read_text()
    named = set(re.findall(r'"(basht_[a-z_]+)"', source))
    assert named and named <= {m.name for m in metrics}


def test_the_metrics_carry_their_labels():
    labels = {m.name: m.labels for m in prometheus.exporter_metrics()}
    assert labels["basht_energy_joules"] == ("component", "source")
    assert labels["basht_trials"] == ("state",)


# -- the BSO HTTP API ----------------------------------------------------------------------


def test_every_bso_route_is_in_the_reference():
    pytest.importorskip("fastapi")  # the `bso` extra
    api = bso_http.server_api()
    page = bso_http.bso_http_page(api)
    sections = _sections(page)
    paths = api.openapi["paths"]
    assert {"/jobs", "/jobs/batch_size", "/report", "/trials", "/health"} <= set(paths)
    for path, item in paths.items():
        for method, operation in item.items():
            section = sections.get(f"`{method.upper()} {path}`")
            assert section is not None, f"{method} {path}"
            assert "**Token:**" in section
            for parameter in operation.get("parameters", []):
                assert f"| `{parameter['name']}` |" in section
            for status in operation.get("responses", {}):
                assert f"| `{status}` |" in section
    for name in api.openapi["components"]["schemas"]:
        assert f"`{name}`" in sections, name


def test_which_routes_need_the_token():
    pytest.importorskip("fastapi")
    api = bso_http.server_api()
    assert bso_http.token_rule(api, "GET", "/health") == "never"
    assert bso_http.token_rule(api, "GET", "/jobs") == "with `--protect-reads`"
    assert bso_http.token_rule(api, "POST", "/report") == "when the server has one"


# -- the benchmarks ------------------------------------------------------------------------

RESULTS = sorted((ROOT / "benchmarks/results").glob("*.json"))


@pytest.fixture(scope="module")
def pages() -> dict[str, str]:
    return benchmarks.benchmark_pages(ROOT)


def test_every_results_file_has_a_page_listed_in_the_index_and_the_nav(pages):
    config = yaml.safe_load((ROOT / "mkdocs.yml").read_text())
    section = next(entry["Benchmarks"] for entry in config["nav"] if "Benchmarks" in entry)
    in_nav = {p if isinstance(p, str) else next(iter(p.values())) for p in section}
    assert RESULTS
    for path in RESULTS:
        assert f"benchmarks/{path.stem}.md" in pages
        assert f"benchmarks/{path.stem}.md" in in_nav, f"add {path.stem} to mkdocs.yml's nav"
        assert f"]({path.stem}.md)" in pages["benchmarks/index.md"]
        assert pages[f"benchmarks/{path.stem}.json"] == path.read_text()
    assert "benchmarks/index.md" in in_nav


def test_the_pages_show_the_numbers_in_the_files(pages):
    for path in RESULTS:
        data = json.loads(path.read_text())
        page = pages[f"benchmarks/{path.stem}.md"]
        for key, value in benchmarks._settings(data).items():
            assert f"| `{key}` | {benchmarks.show(value)} |" in page, f"{path.name}: {key}"


def test_records_become_table_rows():
    data = {
        "benchmark": "b",
        "runs": [{"algorithm": "ASHA", "jct_s": 1.23456789}, {"algorithm": "SHA", "jct_s": 2}],
    }
    page = benchmarks.result_page(benchmarks.Result("b", data, "b", "Measures b."))
    assert "| algorithm | jct\\_s |" in page  # text from a file is escaped for Markdown
    assert "| ASHA | 1.2346 |" in page and "| SHA | 2 |" in page


def test_the_descriptions_come_from_the_benchmark_scripts_page():
    page = (ROOT / benchmarks.SCRIPTS_PAGE).read_text()
    described = benchmarks.script_descriptions(page)
    assert "overhead" in described and "engine overhead per trial" in described["overhead"]
    found = {r.stem: r for r in benchmarks.results(ROOT)}
    assert found["asha_scale_eta3"].script == "asha_scale"
    assert all(r.description for r in found.values())


# -- the Python API page -------------------------------------------------------------------


def test_every_top_level_name_is_on_the_python_api_page():
    import basht

    page = (ROOT / "docs/reference/python-api.md").read_text()
    for name in basht.__all__:
        assert f"::: basht.{name}\n" in page, name


def test_the_generated_pages_are_not_kept_in_docs(pages):
    """They are written at build time only: a copy kept in docs/ would go stale."""
    from _gen.pages import REFERENCE

    kept = [path for path in [*REFERENCE, *pages] if (ROOT / "docs" / path).exists()]
    assert not kept


# -- the README ----------------------------------------------------------------------------


def test_the_readme_is_short_and_keeps_the_two_commands_and_a_valid_example(tmp_path):
    from basht.experiment import load_experiment

    readme = (ROOT / "README.md").read_text()
    assert len(readme.splitlines()) <= 200
    assert "pip install torch==2.13.0 && pip install -e '.[all]' && basht run examples/" in readme
    tests = "pip install torch==2.13.0 && pip install -e '.[test]' && "
    assert tests + "pip install --no-deps 'syne-tune>=0.16,<0.17' && python -m pytest" in readme
    example = tmp_path / "exp.yaml"
    example.write_text(readme.split("```yaml\n", 1)[1].split("```", 1)[0])
    assert load_experiment(example).search.pruner == "asha"


def test_the_readme_links_only_to_docs_pages_that_exist():
    import re

    readme = (ROOT / "README.md").read_text()
    links = re.findall(r"\]\((docs/[^)#]+)", readme)
    assert links and all((ROOT / link).is_file() for link in links), links
