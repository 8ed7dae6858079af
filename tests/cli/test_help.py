"""Every command's help, as a person reads it: plain metavars (`ID`, `FILE`, `N`), never a type
name, and a text for every option and argument."""

from __future__ import annotations

import re
from collections.abc import Iterator
from typing import Any

import pytest


def commands() -> Iterator[tuple[list[str], Any]]:
    import typer

    from ptreg.cli import app

    def walk(command: Any, path: list[str]) -> Iterator[tuple[list[str], Any]]:
        yield path, command
        if hasattr(command, "list_commands"):  # a group (Typer vendors its own click)
            for name in command.list_commands(None):
                sub = command.get_command(None, name)
                assert sub is not None, name
                yield from walk(sub, [*path, name])

    yield from walk(typer.main.get_command(app), [])


PATHS = [path for path, _ in commands()]
# What Typer 0.27 and later print for options and arguments declared without a plain metavar.
TYPE_NAMES = re.compile(r"<(?:str|bool|int|float|list|path|int range|float range)[^>]*>|\{[A-Z_]+\}|\[x[<>]=")


@pytest.mark.parametrize("path", PATHS, ids=[" ".join(p) or "ptreg" for p in PATHS])
def test_help_names_values_plainly_and_explains_every_option(cli, path: list[str]) -> None:
    shown = cli(*path, "--help")
    assert shown.code == 0, shown.err
    assert not TYPE_NAMES.search(shown.out), TYPE_NAMES.search(shown.out)
    command = next(c for p, c in commands() if p == path)
    for param in command.params:
        if param.name == "help":
            continue
        assert (getattr(param, "help", None) or "").strip(), f"{' '.join(path)}: {param.name} has no help text"


def test_every_command_group_is_walked() -> None:
    assert ["run"] in PATHS and ["vocab", "add"] in PATHS and ["evaluator", "freeze"] in PATHS


@pytest.mark.parametrize("path", PATHS, ids=[" ".join(p) or "ptreg" for p in PATHS])
def test_an_install_hint_keeps_its_extra(cli, path: list[str], monkeypatch) -> None:
    """Rich reads `[site]` as markup and drops it: `pip install 'ptreg'` would install no extra."""
    monkeypatch.setenv("COLUMNS", "200")  # one hint on one line
    shown = cli(*path, "--help").out
    assert "install 'ptreg'" not in shown
    if path == ["site"]:
        assert "pip install 'ptreg[site]'" in shown
