"""The layers of ptreg: no module imports a higher layer, and no import cycle exists, counting
imports made inside functions. Only the listed imports inside functions are allowed."""

from __future__ import annotations

import ast
from pathlib import Path

from helpers import REPO

PACKAGE = REPO / "ptreg"
# Lowest first; a module may import its own layer and the ones below it.
# agents (the MCP server) is a front end like cli: it may import operations and below, and only
# cli imports it (inside `ptreg mcp`, so that no other command loads the MCP SDK).
LAYERS = ["base", "records", "store", "engine", "views", "gate", "site", "operations", "agents", "cli", "main"]
BASE = {"ptreg", "ptreg.errors", "ptreg.text", "ptreg.clock", "ptreg.harness"}
# Own modules imported inside a function of the library, each to keep NumPy or pydantic models
# off the start-up path of commands that do not need them (docs/architecture.md). The command
# line imports the library inside its commands, for the same reason, and the program
# (``__main__``) the command line, once the working directory is off the import path.
ALLOWED_INSIDE_FUNCTIONS = {
    ("ptreg.engine.workloads.training", "ptreg.engine.workloads.tinygpt"),
    ("ptreg.engine.worker", "ptreg.engine.parity"),
    ("ptreg.engine.worker", "ptreg.engine.op_parity"),
    ("ptreg.views.dossier", "ptreg.views.dossier_runs"),
    ("ptreg.store.index.freshness", "ptreg.store.record_file"),
    ("ptreg.store.lineage_read", "ptreg.store.lineage_files"),
}


def module_name(path: Path) -> str:
    parts = path.relative_to(REPO).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def layer(module: str) -> str:
    if module in BASE:
        return "base"
    if module == "ptreg.__main__":
        return "main"
    return module.split(".")[1]


def own_imports(path: Path) -> list[tuple[str, bool]]:
    """(imported ptreg module, whether the import is inside a function) for every import."""
    module = module_name(path)
    package = module if path.name == "__init__.py" else module.rsplit(".", 1)[0]
    found: list[tuple[str, bool]] = []

    def visit(node: ast.AST, inside: bool) -> None:
        for child in ast.iter_child_nodes(node):
            nested = inside or isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda))
            if isinstance(child, ast.ImportFrom):
                if child.level:
                    base = package.split(".")
                    base = base[: len(base) - (child.level - 1)]
                    target = ".".join(base + ([child.module] if child.module else []))
                else:
                    target = child.module or ""
                if target.split(".")[0] == "ptreg":
                    for alias in child.names:
                        candidate = f"{target}.{alias.name}"
                        is_module = (REPO / Path(*candidate.split("."))).with_suffix(".py").exists() or (
                            REPO / Path(*candidate.split(".")) / "__init__.py"
                        ).exists()
                        found.append((candidate if is_module else target, nested))
            elif isinstance(child, ast.Import):
                found.extend((a.name, nested) for a in child.names if a.name.split(".")[0] == "ptreg")
            visit(child, nested)

    visit(ast.parse(path.read_text(encoding="utf-8")), False)
    return found


def graph() -> dict[str, list[tuple[str, bool]]]:
    return {module_name(p): own_imports(p) for p in sorted(PACKAGE.rglob("*.py"))}


def test_every_module_is_in_a_layer() -> None:
    for module in graph():
        assert layer(module) in LAYERS, f"{module} is in no layer ({', '.join(LAYERS)})"


def test_no_module_imports_a_higher_layer() -> None:
    upward = [
        f"{module} ({layer(module)}) imports {target} ({layer(target)})"
        for module, imports in graph().items()
        for target, _ in imports
        if LAYERS.index(layer(target)) > LAYERS.index(layer(module))
    ]
    assert upward == []


def test_no_import_cycle_even_inside_functions() -> None:
    edges = {module: {t for t, _ in imports if t != module} for module, imports in graph().items()}
    state: dict[str, int] = {}
    cycles: list[list[str]] = []

    def walk(node: str, path: list[str]) -> None:
        state[node] = 1
        for target in sorted(edges.get(node, ())):
            if state.get(target) == 1:
                cycles.append([*path[path.index(target) :], target])
            elif target not in state:
                walk(target, [*path, target])
        state[node] = 2

    for module in sorted(edges):
        if module not in state:
            walk(module, [module])
    assert cycles == []


def test_imports_inside_functions_are_only_the_listed_ones() -> None:
    inside = {
        (module, target)
        for module, imports in graph().items()
        for target, nested in imports
        if nested and layer(module) not in ("cli", "main")
    }
    assert inside == ALLOWED_INSIDE_FUNCTIONS


def test_the_command_line_imports_nothing_heavy_at_start_up() -> None:
    """Importing the command line loads typer and the command modules, not the library (what
    each command then loads: tests/cli/test_import_claims.py)."""
    import subprocess
    import sys

    code = "import sys, ptreg.cli; print(sorted(m for m in sys.modules if m.startswith(('pydantic', 'numpy'))))"
    loaded = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert loaded.strip() == "[]"


def test_the_library_never_imports_the_command_line() -> None:
    for module, imports in graph().items():
        if layer(module) not in ("cli", "main"):
            assert not [t for t, _ in imports if layer(t) == "cli"], module


def test_the_gate_s_checks_read_no_file() -> None:
    """gate/checks.py decides over inputs read beforehand (gate/gate_inputs.py): it imports nothing
    that reads files (store) or turns them into views."""
    imports = graph()["ptreg.gate.checks"]
    assert [t for t, _ in imports if t.startswith(("ptreg.store", "ptreg.views"))] == []


def test_only_the_command_line_turns_errors_into_exit_codes() -> None:
    """The library raises typed errors (errors.py: UnusableInput, CheckFailed); the exit codes
    are named only there and in cli/ (and the MCP server, a front end of its own, names none)."""
    found = [
        f"{path.relative_to(REPO)}:{n}"
        for path in sorted((REPO / "ptreg").rglob("*.py"))
        if path.parent.name != "cli" and path.name != "errors.py"
        for n, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1)
        if "EXIT_CHECK_FAILED" in line or "EXIT_UNUSABLE" in line
    ]
    assert found == []


def test_no_module_is_longer_than_a_reader_can_hold() -> None:
    longest = {
        str(path.relative_to(REPO)): n
        for path in (REPO / "ptreg").rglob("*.py")
        if (n := len(path.read_text(encoding="utf-8").splitlines())) > 600
    }
    assert longest == {}


def test_no_module_name_repeats_across_layers() -> None:
    """A module's name says its layer's purpose: two layers never hold modules of one name
    (``__init__`` and the layer packages' own entry modules aside)."""
    seen: dict[str, list[str]] = {}
    for path in (REPO / "ptreg").rglob("*.py"):
        if path.name != "__init__.py":
            seen.setdefault(path.stem, []).append(str(path.parent.relative_to(REPO)))
    assert {name: places for name, places in seen.items() if len(places) > 1} == {}
