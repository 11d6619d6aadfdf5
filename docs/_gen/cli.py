"""The command-line reference, walked from the click command that typer builds from `basht.cli.app`,
so every command, option and help text is the one `basht --help` prints."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from enum import Enum
from pathlib import PurePath
from typing import Any

from .markdown import anchor, code, table


@dataclass(frozen=True)
class Command:
    """One command of the tree with the click context it is shown in."""

    path: str  # "basht bso serve"
    command: Any  # the click (or typer's click) command
    context: Any


def root_command() -> Any:
    """The click command `basht` runs."""
    import typer.main

    from basht.cli import app

    return typer.main.get_command(app)


def commands(root: Any | None = None) -> Iterator[Command]:
    """Every visible command and sub-command, depth first, in the order `--help` lists them."""
    root = root if root is not None else root_command()

    def walk(command: Any, name: str, parent: Any) -> Iterator[Command]:
        # Each command names its Context class (typer ships its own copy of click).
        context = command.context_class(command, info_name=name, parent=parent)
        yield Command(context.command_path, command, context)
        children = getattr(command, "commands", {})
        for child_name in command.list_commands(context) if children else []:
            child = children[child_name]
            if not getattr(child, "hidden", False):
                yield from walk(child, child_name, context)

    yield from walk(root, "basht", None)


def params(command: Command) -> list[Any]:
    """The visible parameters of a command, arguments first (as the usage line has them)."""
    shown = [p for p in command.command.params if not getattr(p, "hidden", False)]
    return sorted(shown, key=lambda p: p.param_type_name != "argument")


def is_flag(param: Any) -> bool:
    return bool(getattr(param, "is_flag", False))


def param_names(param: Any) -> list[str]:
    """What a user types: `-q`, `--quiet`, `--plots`, `--no-plots`; an argument's metavar."""
    if param.param_type_name == "argument":
        name = param.metavar or param.name.upper()
        return [f"{name}..." if param.nargs == -1 else name]
    return sorted(param.opts, key=len) + list(param.secondary_opts)


def _type(param: Any, context: Any) -> str:
    if is_flag(param):
        return "flag"
    shown = getattr(param, "display_type", None)
    text = shown(context) if callable(shown) else getattr(getattr(param, "type", None), "name", "")
    text = str(text).strip("<>")
    if text.startswith("list[") and text.endswith("]"):
        return f"list of {_TYPES.get(text[5:-1].lower(), text[5:-1].lower())}"
    return _TYPES.get(text.lower(), text) or "text"


# The words typer and click use for types, as the reference says them.
_TYPES = {
    "str": "text",
    "string": "text",
    "int": "integer",
    "int range": "integer",
    "integer range": "integer",
    "float": "number",
    "float range": "number",
    "bool": "flag",
    "boolean": "flag",
}


def _bounds(param: Any) -> str:
    low = getattr(param, "min", None)
    high = getattr(param, "max", None)
    kind = getattr(param, "type", None)
    if low is None and high is None and kind is not None:  # plain click keeps it on the type
        low, high = getattr(kind, "min", None), getattr(kind, "max", None)
    said = ([f"≥ {low}"] if low is not None else []) + ([f"≤ {high}"] if high is not None else [])
    return ", ".join(said)


def _default(param: Any) -> str:
    if param.required:
        return "required"
    value = param.default
    if is_flag(param):
        if param.secondary_opts:  # --plots/--no-plots: the one in effect
            on = max(param.opts, key=len)
            return code(on if value else max(param.secondary_opts, key=len))
        return "off" if not value else "on"
    if value is None or callable(value):
        return "—"
    if isinstance(value, Enum):
        value = value.value
    if isinstance(value, PurePath):
        value = str(value)
    if isinstance(value, list | tuple):
        return ", ".join(code(v) for v in value) or "—"
    return code(value)


def _help(param: Any) -> str:
    text = " ".join((getattr(param, "help", None) or "").split())
    envvar = param.envvar
    if envvar and getattr(param, "show_envvar", True):
        names = envvar if isinstance(envvar, list | tuple) else [envvar]
        text += f" Environment variable: {', '.join(code(n) for n in names)}."
    return text.strip()


def usage(command: Command) -> str:
    """`basht run [OPTIONS] FILE`, as the reader types it."""
    pieces = [command.path]
    if any(p.param_type_name == "option" for p in params(command)):
        pieces.append("[OPTIONS]")
    pieces += [param_names(p)[0] for p in params(command) if p.param_type_name == "argument"]
    if getattr(command.command, "commands", None):
        pieces.append("COMMAND [ARGS]...")
    return " ".join(pieces)


def _section(command: Command) -> str:
    # `basht` and its commands are siblings (##); `basht bso`'s commands go under it.
    level = "#" * min(max(command.path.count(" "), 1) + 1, 4)
    parts = [f"{level} `{command.path}` {{ #{anchor(command.path)} }}\n"]
    if command.command.help:
        parts.append(command.command.help.strip().replace("\b\n", "") + "\n")
    parts.append(f"```\n{usage(command)}\n```\n")
    children = getattr(command.command, "commands", {})
    if children:
        rows = [
            [
                f"[{code(f'{command.path} {name}')}](#{anchor(f'{command.path} {name}')})",
                _first_line(c),
            ]
            for name, c in children.items()
            if not getattr(c, "hidden", False)
        ]
        parts.append(table(["command", "what it does"], rows))
    shown = params(command)
    if shown:
        rows = [
            [
                ", ".join(code(n) for n in param_names(p)),
                _type(p, command.context),
                _default(p),
                _bounds(p),
                _help(p),
            ]
            for p in shown
        ]
        parts.append(table(["argument or option", "type", "default", "allowed", "help"], rows))
    return "\n".join(parts)


def _first_line(command: Any) -> str:
    text = command.short_help or command.help or ""
    return text.strip().split("\n\n")[0]


def cli_page(root: Any | None = None) -> str:
    """The Markdown of `reference/cli.md`."""
    parts = [
        "# Command line\n",
        "Every `basht` command and sub-command, with each argument and option as `--help` shows "
        "it. This page is generated from the command itself at build time. Bad input never "
        "gives a traceback: one line naming what was wrong, and exit code 2.\n",
    ]
    parts += [_section(c) for c in commands(root)]
    return "\n".join(parts)
