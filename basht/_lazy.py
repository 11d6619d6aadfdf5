"""Lazy package roots (PEP 562): a package names its public API without importing it.

`import basht.engine.worker` in a spawned trial process should load what a trial needs, not the
store, the reports and the CLI that an eager `basht/__init__.py` would pull in. A package root
writes its exports once, as the imports of an `if TYPE_CHECKING:` block (what type checkers and
editors read) plus `__all__`; `lazy_exports` reads that block from the source and imports a name
from its module the first time it is used.
"""

from __future__ import annotations

import ast
import sys
from collections.abc import Callable
from importlib import import_module
from typing import Any


def _type_checking_imports(path: str) -> dict[str, str]:
    """`{name: module}` for each `from module import name` under `if TYPE_CHECKING:` in `path`."""
    with open(path, encoding="utf-8") as source:
        tree = ast.parse(source.read(), path)
    where: dict[str, str] = {}
    for node in tree.body:
        if isinstance(node, ast.If) and ast.unparse(node.test) == "TYPE_CHECKING":
            for stmt in node.body:
                if isinstance(stmt, ast.ImportFrom) and stmt.module:
                    where.update({alias.asname or alias.name: stmt.module for alias in stmt.names})
    return where


def lazy_exports(package: str) -> tuple[Callable[[str], Any], Callable[[], list[str]]]:
    """`__getattr__` and `__dir__` for `package`, from its `if TYPE_CHECKING:` imports."""
    module = sys.modules[package]
    where = _type_checking_imports(module.__file__ or "")
    missing = sorted(set(getattr(module, "__all__", ())) - set(where) - set(vars(module)))
    if missing:  # a name in __all__ that nothing provides: a mistake in the package root
        raise ImportError(f"{package}: __all__ names {missing} but nothing imports them")

    for name, source in where.items():
        if source == f"{package}.{name}":
            # A name its own submodule is called by (`basht.tune.replay`): importing the module
            # later would bind the module in its place, so the name is bound now.
            setattr(module, name, getattr(import_module(source), name))

    def __getattr__(name: str) -> Any:
        source = where.get(name)
        if source is None:
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        value = getattr(import_module(source), name)
        setattr(module, name, value)  # the next lookup skips __getattr__
        return value

    def __dir__() -> list[str]:
        return sorted(set(vars(module)) | set(where))

    return __getattr__, __dir__
