"""What docs/*.md, the README and the help texts claim of the program is what the program does:
each `ptreg ...` command a page shows runs, on a copy of this project's registry, and exits as
the page implies (the few that cannot run here are listed with the reason); each option a page
names is one its command takes; each number a help text states is the one the program uses; and
every command sits in one panel of `ptreg --help`. A page or help edited apart from the program
(or the program apart from them) fails here."""

from __future__ import annotations

import itertools
import re
import shlex
import shutil
import signal
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import typer

from helpers import REPO
from ptreg.cli import PANELS, app

PAGES = [REPO / "README.md", *sorted((REPO / "docs").glob("*.md"))]
NOT_SHELL = {"python", "json", "toml", "yaml", "jinja", "html", "text"}


def _page_commands(page: Path) -> Iterator[tuple[str, list[str]]]:
    """Each `ptreg ...` command of a page's fenced shell blocks (a `$ ` prompt or none, `\\`
    continuations joined), with the output lines the page shows after it (up to the next command
    or the block's end)."""
    text = page.read_text(encoding="utf-8")
    for block in re.finditer(r"^```([^\n]*)\n(.*?)^```", text, re.M | re.S):
        if block.group(1).strip() in NOT_SHELL:
            continue
        lines = block.group(2).splitlines()
        i = 0
        while i < len(lines):
            line = lines[i][2:] if lines[i].startswith("$ ") else lines[i]
            line = re.sub(r"^cd \S+ && ", "", line)  # a walk-through that starts in a folder of its own
            i += 1
            if not line.startswith("ptreg "):
                continue
            while line.endswith("\\") and i < len(lines):
                line = line[:-1].rstrip() + " " + lines[i].strip()
                i += 1
            shown = []
            while i < len(lines) and not lines[i].startswith(("$ ", "ptreg ")):
                shown.append(lines[i])
                i += 1
            yield line, shown


COMMANDS = [(page, command, shown) for page in PAGES for command, shown in _page_commands(page)]


def _words(command: str) -> list[str]:
    """The command's words, a trailing `# comment` and a shell pipe or background left out."""
    words = shlex.split(command, comments=True)
    for stop in ("|", "&", ">"):
        if stop in words:
            words = words[: words.index(stop)]
    return words


def _key(page: Path, command: str) -> str:
    return f"{page.name}: {' '.join(_words(command))}"


# Commands a page shows that cannot run here, each with the reason. Every other command runs.
CANNOT_RUN = {
    "README.md: ptreg new --id my-attempt": "a template: its values are '...'",
    "README.md: ptreg run my-attempt": "measures for minutes, after the template above",
    "README.md: ptreg conclude": "a template after a run: its values are '...'",
    "README.md: ptreg bench": "measures backends for minutes",
    "README.md: ptreg run perf-gate": "measures two git revisions of a project of the reader's",
    "README.md: ptreg compare my-attempt my-next-attempt": "a template: the reader's attempts",
    "agents.md: ptreg next [--limit N] [--json]": "a synopsis, not a command",
    "agents.md: ptreg mcp": "serves until its client leaves (tests/agents/ hold a client)",
    "backends.md: ptreg bench": "measures a backend of the reader's for minutes",
    "comparing.md: ptreg init": "the page's walk-through in a project of the reader's, with ci/gate.json and git "
    "revisions HEAD~1 and HEAD",
    "comparing.md: ptreg evaluator freeze ci/gate.json": "the same walk-through",
    "comparing.md: ptreg new --no-input --id perf-gate": "the same walk-through",
    "comparing.md: ptreg run perf-gate": "the same walk-through",
    "comparing.md: ptreg compare tiled-step-before tiled-step-after": "an illustration: no such attempts here",
    "conditions.md: ptreg conclude": "a concluded attempt's command, shown as it was given (its values are '...')",
    "engine.md: ptreg bench": "measures backends for minutes",
    "gate.md: ptreg -r reg": "a scenario the page builds in a registry 'reg' of its own",
    "gate.md: ptreg new --id challenger-kneser-ney": "a template: its values are '...'",
    "gate.md: ptreg run challenger-kneser-ney": "measures a command for minutes",
    "gate.md: ptreg conclude challenger-kneser-ney": "a template after a run",
    "gate.md: ptreg run tile-b": "a scenario of two merged branches the page describes, not this registry",
    "gate.md: ptreg readmit tile-b": "the same scenario",
    "gate.md: ptreg evaluator freeze level-eval-fixed.json": "a scenario of an evaluator the page describes",
    "gate.md: ptreg readmit level": "the same scenario",
    "gate.md: ptreg run level": "the same scenario",
    "index.md: ptreg index watch": "stays running until stopped (tests/store/ start and stop it)",
    "measurements.md: ptreg run": "measures for minutes",
    "measurements.md: ptreg bench": "measures for minutes",
    "ray.md: ptreg run": "needs a Ray cluster",
    "registry.md: ptreg validate ../shared": "reads ../shared, the material beside the repository",
    "registry.md: ptreg -r /tmp/": "a registry imported from ../shared, the material beside the repository",
    "registry.md: ptreg export --bundle /tmp/attempts.tar.gz": "writes outside the test's folder as written; "
    "tests/test_docs_figures.py runs it into a folder of its own",
    "registry.md: ptreg new ... --method tiling": "shows the refusal of unknown terms ('...' elides the rest)",
    "site.md: ptreg site": "builds every page and chart of the registry: slow here (tests/site/ build sites)",
    "workloads.md: ptreg init": "the page's walk-through: tests/engine/test_writing_a_workload.py runs it",
    "workloads.md: ptreg vocab add method partial-selection": "the same walk-through",
    "workloads.md: ptreg evaluator freeze smallest.json": "the same walk-through",
    "workloads.md: ptreg new --no-input --id heap-smallest": "the same walk-through",
    "workloads.md: ptreg run heap-smallest": "the same walk-through",
}
# What a runnable command needs beside the registry's copy, and the exit its page implies when not 0.
EXITS = {
    # a dry run the gate refuses, as the page shows
    "conditions.md: ptreg new --id tinygpt-numba-tile-4x8": 1,
}
# Commands a page shows in a project of the reader's, just made by `ptreg init`: run in an empty
# folder, after it (the specs under benchmarks/ beside them, as in this repository).
NEW_PROJECT = (
    "README.md: ptreg init",
    "README.md: ptreg vocab add method loop-tiling",
    "README.md: ptreg evaluator freeze benchmarks/evaluators/tinygpt-sweep.json",
)
# The README's validate resolves sources where they are, in the repository (as test_docs_figures does).
EXTRA = {"ptreg validate --check-sources": ["--sources-base", str(REPO / "attempts")]}


def _reason(key: str) -> str | None:
    found = [why for start, why in CANNOT_RUN.items() if key.startswith(start)]
    return found[0] if found else None


def _exit(key: str) -> int:
    return next((code for start, code in EXITS.items() if key.startswith(start)), 0)


RUNNABLE = [(p, c, s) for p, c, s in COMMANDS if _reason(_key(p, c)) is None]


def test_every_command_that_cannot_run_is_listed_and_every_listed_one_is_shown() -> None:
    keys = [_key(p, c) for p, c, _ in COMMANDS]
    assert len(COMMANDS) > 50, "the pages' commands were not found"
    assert [start for start in CANNOT_RUN if not any(k.startswith(start) for k in keys)] == []
    runnable = [_key(p, c) for p, c, _ in RUNNABLE]
    assert [start for start in EXITS if not any(k.startswith(start) for k in runnable)] == []


@pytest.fixture
def project(tmp_path: Path) -> Path:
    """A copy of this project's registry, and the benchmark specs the README freezes, where
    `ptreg` finds them as it would in the repository."""
    # Not ptreg's working files (a local index, locks): a fresh clone has none, and a copied
    # index would describe files it never read.
    shutil.copytree(REPO / "attempts", tmp_path / "attempts", ignore=shutil.ignore_patterns(".ptreg*"))
    shutil.copytree(REPO / "benchmarks" / "evaluators", tmp_path / "benchmarks" / "evaluators")
    return tmp_path


@pytest.mark.parametrize(("page", "command", "shown"), RUNNABLE, ids=[_key(p, c) for p, c, _ in RUNNABLE])
def test_a_command_a_page_shows_exits_as_the_page_implies(
    cli, project: Path, page: Path, command: str, shown: list[str]
) -> None:
    key = _key(page, command)
    if key.startswith(NEW_PROJECT):
        shutil.rmtree(project / "attempts")
        if not key.startswith(NEW_PROJECT[0]):
            assert cli("init").code == 0
    words = _words(command)[1:] + EXTRA.get(" ".join(_words(command)), [])
    done = cli(*words)
    expected = _exit(key)
    assert done.code == expected, f"{key}: exit {done.code}, the page implies {expected}: {done.err.strip()}"
    assert "Traceback" not in done.err
    if any(line.startswith("ptreg: error") for line in shown):  # an error the page shows is not an exit 0
        assert expected != 0


# --------------------------------------------------------------------------- options the pages name

ROOT = typer.main.get_command(app)
GLOBAL_WITH_VALUE = {"-r", "--registry"}


def _command_of(words: list[str]) -> tuple[Any, list[str], str]:
    """The click command a `ptreg ...` line runs, the words after its name, and its path."""
    command, path, rest = ROOT, ["ptreg"], words[1:]
    while rest:
        word = rest[0]
        if word in GLOBAL_WITH_VALUE:
            rest = rest[2:]
        elif hasattr(command, "commands") and word in command.commands:
            command, path, rest = command.commands[word], [*path, word], rest[1:]
        else:
            break
    return command, rest, " ".join(path)


def _options(command: Any) -> set[str]:
    """The options its --help lists (a hidden one is not for a page to name)."""
    shown = [p for p in command.params if not getattr(p, "hidden", False)]
    return {o for p in shown for o in (*p.opts, *p.secondary_opts)} | {"--help"}


def _inline_commands(page: Path) -> Iterator[str]:
    """`ptreg ...` in a page's inline code, e.g. `ptreg list --method M`."""
    text = re.sub(r"^```.*?^```", "", page.read_text(encoding="utf-8"), flags=re.M | re.S)
    yield from re.findall(r"`(ptreg [^`]+)`", text)


NAMED = [(page, command) for page, command, _ in COMMANDS] + [(p, c) for p in PAGES for c in _inline_commands(p)]


def test_every_command_and_option_a_page_names_is_one_ptreg_has() -> None:
    unknown = []
    for page, line in NAMED:
        try:
            words = _words(line)
        except ValueError:  # inline prose with an unclosed quote: its words as they stand
            words = line.split()
        command, rest, path = _command_of(words)
        if hasattr(command, "commands") and rest and not rest[0].startswith("-"):
            unknown.append(f"{page.name}: `{path} {rest[0]}` is no command")
        flags = {w.split("=")[0].strip("[]") for w in rest if w.lstrip("[").startswith("--")}
        unknown += [f"{page.name}: `{path} {f}`" for f in sorted(flags - _options(command))]
    assert unknown == []


# --------------------------------------------------------------------------- terms the pages use

VOCABULARY_OF = {"--method": "method", "--objective": "objective", "--kind": "kind", "--confidence": "confidence"}
# Terms a page uses on purpose outside the vocabulary: the refusal it shows.
UNKNOWN_ON_PURPOSE = {("registry.md", "method", "tiling"), ("registry.md", "objective", "speed")}


def _terms(vocabulary: str) -> set[str]:
    return {f.stem for f in (REPO / "attempts" / "vocabulary" / vocabulary).glob("*.json")}


def test_every_term_a_pages_command_uses_is_in_the_vocabulary_or_added_first() -> None:
    unknown = []
    for page in PAGES:
        added: set[tuple[str, str]] = set()
        for command, _ in _page_commands(page):
            words = _words(command)
            if words[1:3] == ["vocab", "add"]:
                added.add((words[3], words[4]))
            if words[1] in GLOBAL_WITH_VALUE:  # a registry the page builds (from ../shared): its own terms
                continue
            for flag, value in itertools.pairwise(words):
                vocabulary = VOCABULARY_OF.get(flag)
                if vocabulary is None or value == "..." or (vocabulary, value) in added:
                    continue
                if value not in _terms(vocabulary) and (page.name, vocabulary, value) not in UNKNOWN_ON_PURPOSE:
                    unknown.append(f"{page.name}: {flag} {value}")
    assert unknown == []
    shown = (REPO / "docs" / "registry.md").read_text(encoding="utf-8")
    assert all(f"{vocabulary} '{term}' is not in the" in shown for _, vocabulary, term in UNKNOWN_ON_PURPOSE)


# --------------------------------------------------------------------------- numbers the help states


def _helps(command: Any = ROOT, path: str = "ptreg") -> Iterator[tuple[str, str]]:
    """(where, text) of every help text: each command's, and each of its options' and arguments'."""
    yield path, command.help or ""
    for param in command.params:
        if getattr(param, "help", None):
            yield f"{path} {param.opts[0]}", param.help
    for name, sub in getattr(command, "commands", {}).items():
        yield from _helps(sub, f"{path} {name}")


def _percent(fraction: float) -> str:
    return f"{100 * fraction:g}%"


def _signal_exits() -> tuple[int, int, int]:
    """The exit codes of a command stopped by SIGINT, SIGTERM and SIGHUP."""
    from ptreg.engine.interruption import Interrupted

    sigint, sigterm, sighup = (Interrupted(s).exit_code for s in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP))
    return sigint, sigterm, sighup


def _claims() -> list[tuple[str, str]]:
    """(where, the phrase it must hold), each phrase made from the value the program uses."""
    from ptreg.cli.reading import SHOWN_RUNS
    from ptreg.engine.comparison_rules import (
        ADJUSTMENT,
        COUNTS_THRESHOLD,
        FAMILY_ERROR_RATE,
        MIN_HISTORY,
        TIMES_THRESHOLD,
    )
    from ptreg.errors import EXIT_CHECK_FAILED as FAILED
    from ptreg.errors import EXIT_UNUSABLE as UNUSABLE
    from ptreg.records.analysis_plan import MAX_POOLED_RUNS, Plan
    from ptreg.records.intervals import LEVEL
    from ptreg.records.ledger import CAUTION_AT, STOP_AT

    sigint, sigterm, sighup = _signal_exits()
    assert MAX_POOLED_RUNS > 1
    return [
        ("ptreg", f"Exit codes: 0 ok, {FAILED} a check failed, {UNUSABLE} unusable input."),
        ("ptreg validate", f"Errors exit {FAILED}"),
        ("ptreg repair", f"Exit 0 when nothing is left to put right, {FAILED} when something needs a person"),
        ("ptreg streaks", f"CAUTION at {CAUTION_AT}, STOP AND RETHINK at {STOP_AT}+"),
        ("ptreg schema --check", f"exit {FAILED} if the files differ"),
        ("ptreg new", f"A refused check exits {FAILED}"),
        ("ptreg new --decide-on-runs", f"{Plan.model_fields['runs'].default} (the default) is the first complete run"),
        ("ptreg gate", f"Exit {FAILED} if a check fails"),
        ("ptreg show --runs", f"(default: {SHOWN_RUNS} as text or markdown"),
        (
            "ptreg run",
            f"exits {sigint}, {sigterm} or {sighup}. Exit 0 when the run is complete, {FAILED} when it failed",
        ),
        ("ptreg run", f"{UNUSABLE} on unusable input"),
        ("ptreg run --fail-on-regression", f"exit {FAILED} when it decides regressed"),
        ("ptreg run --fail-on-regression", "worked and failed exit 0"),
        ("ptreg runs", f"Exit 0; {UNUSABLE} when the registry"),
        ("ptreg conclude", f"(exit {FAILED} without one)"),
        ("ptreg compare", f"with its {_percent(LEVEL)} interval"),
        ("ptreg compare", f"with fewer than {MIN_HISTORY} batches no verdict is given"),
        (
            "ptreg compare",
            f"adjusted together ({ADJUSTMENT}), so an unchanged cell is flagged in at most "
            f"{_percent(FAMILY_ERROR_RATE)} of comparisons",
        ),
        ("ptreg compare", f"Exit {FAILED} when the runs were made under different evaluators"),
        ("ptreg compare --threshold", f"Default: {_percent(COUNTS_THRESHOLD)} for instruction counts"),
        ("ptreg compare --threshold", f"{_percent(TIMES_THRESHOLD)} for times and arms' metrics"),
        ("ptreg compare --fail-on-regression", f"exit {FAILED} when any cell of B is slower"),
        ("ptreg compare --fail-on-regression", f"and exit {FAILED} when any is given no verdict"),
        ("ptreg history", f"the {_percent(LEVEL)} interval of the typical value"),
        ("ptreg mcp", f"(exit {sigterm}, {sigint} or {sighup})"),
        ("ptreg index check", f"exit {FAILED} if they differ"),
        ("ptreg evaluator show", f"exit {FAILED} when not"),
        ("ptreg evaluator verify", f"Exit {FAILED} if an evaluator does not verify"),
        ("ptreg evaluator remove", f"Refused (exit {FAILED})"),
        ("ptreg vocab remove", f"Refused (exit {FAILED})"),
        ("ptreg disposition check", f"exit {FAILED} when a condition that held"),
    ]


# Numbers in help texts that state no value of the program: examples, formats and names.
NOT_VALUES = [
    ("ptreg import", "schema_version 2, schema_version 2 from before its vocabularies, and schema_version 1"),
    ("ptreg import file", "(schema_version 1 or 2)"),
    ("ptreg export --schema-version", "2, or 1: the older format"),
    ("ptreg export --schema-version", "(1 for a registry imported from a schema_version 1 ledger, else 2;"),
    ("ptreg validate", "(a schema_version 1 ledger has no lesson)"),
    ("ptreg new --tracking-issue", "URL, #123, owner/repo#123 or PROJ-123."),
    ("ptreg new --margin", "a factor above 1 for a ratio"),
    ("ptreg next --limit", "(0: all)"),
    ("ptreg items --limit", "(0: all)"),
    ("ptreg show --runs", "all or 0 shows every run"),
    ("ptreg run --detach", "http://HOST:8265"),
    ("ptreg conclude --continue-if", "config=xl) >= 1.25"),
    ("ptreg compare --threshold", "0.05 is 5%"),
    ("ptreg site --serve", "127.0.0.1"),
    ("ptreg site --port", "(0: any free one)"),
    ("ptreg evaluator", "<name>@<hash12>.json"),
    ("ptreg evaluator freeze", "sha256"),
    ("ptreg evaluator trust", "sha256"),
]


def test_every_number_a_help_text_states_is_the_one_the_program_uses() -> None:
    helps = dict(_helps())
    missing, unexplained = [], []
    for where, phrase in [*_claims(), *NOT_VALUES]:
        if phrase not in helps.get(where, ""):
            missing.append(f"{where}: {phrase!r}")
        else:
            helps[where] = helps[where].replace(phrase, "")
    for where, text in helps.items():
        unexplained += [
            f"{where}: {m.group()!r} in {text[max(m.start() - 40, 0) : m.end() + 20]!r}"
            for m in re.finditer(r"\d+(\.\d+)?%?", text)
        ]
    assert missing == [], "a help text no longer says what the program does"
    assert unexplained == [], "a number in a help text that no claim above checks"


# --------------------------------------------------------------------------- panels


def test_the_top_level_help_puts_every_command_in_one_panel(cli, monkeypatch) -> None:
    commands = ROOT.commands
    assert len(commands) > 25
    unplaced = [name for name, c in commands.items() if getattr(c, "rich_help_panel", None) not in PANELS]
    assert unplaced == []
    assert {c.rich_help_panel for c in commands.values()} == set(PANELS)  # no panel left empty
    monkeypatch.setenv("COLUMNS", "120")
    shown = cli("--help").out
    # each command listed once, in the box of its own panel
    boxes = re.split(r"^╭─ ", shown, flags=re.M)[1:]
    listed = {
        box.split(" ─")[0]: re.findall(r"^│ (\S+)\s{2,}", box, re.M) for box in boxes if not box.startswith("Options")
    }
    assert set(listed) == set(PANELS)
    placed = [name for names in listed.values() for name in names]
    assert sorted(placed) == sorted(commands)
    assert all(name in listed[c.rich_help_panel] for name, c in commands.items())


# --------------------------------------------------------------------------- intervals the README promises


def _step_rows(shown: str) -> tuple[str, list[str]]:
    """The title and rows of a dossier's training-step table."""
    lines = shown.splitlines()
    start = next(i for i, line in enumerate(lines) if line.startswith("Training step: "))
    rows = []
    for line in lines[start + 4 :]:
        if not line.strip():
            break
        rows.append(line)
    return lines[start], rows


def test_a_run_from_before_intervals_says_why_its_cells_have_none(cli, project: Path, monkeypatch) -> None:
    monkeypatch.setenv("COLUMNS", "200")
    title, rows = _step_rows(cli("show", "tinygpt-step-attribution").out)
    assert len(rows) == 16
    assert all(row.split()[3:5] == ["not", "recorded"] for row in rows), rows
    assert "run before interleaved rounds (results version 1), so no intervals" in title
    assert "unknown" not in " ".join(rows)
    title, rows = _step_rows(cli("show", "numba-tiles-step-xl").out)
    assert rows and "not recorded" not in title + " ".join(rows)
    assert all(re.fullmatch(r"[\d,.]+-[\d,.]+", row.split()[3]) for row in rows), rows


def test_every_ratio_of_a_run_since_interleaved_rounds_carries_an_interval() -> None:
    from ptreg.records.run_results import INTERVALS_FROM_VERSION
    from ptreg.store.runs import read_results

    checked = 0
    for folder in sorted((REPO / "attempts" / "runs").glob("*/*")):
        results = read_results(folder)
        if results.results_version < INTERVALS_FROM_VERSION:
            continue
        for cell in results.cells:
            for ratio in (cell.vs_naive_ratio, cell.vs_baseline_ratio):
                if ratio is not None and ratio.n > 1:
                    assert ratio.ci is not None, f"{folder.relative_to(REPO)}: {cell.backend}/{cell.config}"
                    checked += 1
    assert checked > 20


# --------------------------------------------------------------------------- numbers the pages state


def _page_claims() -> list[tuple[str, str]]:
    """(page, the phrase it must hold), each made from the value the program uses."""
    from ptreg.engine.comparison_rules import COUNTS_THRESHOLD, FAMILY_ERROR_RATE, MIN_HISTORY
    from ptreg.engine.stats import BATCH_GAP_SECONDS
    from ptreg.records.ledger import CAUTION_AT, STOP_AT

    words = {4: "four"}
    return [
        ("README.md", f"CAUTION at {CAUTION_AT} negatives in a row, STOP AND RETHINK at {STOP_AT}"),
        ("registry.md", f"CAUTION at {CAUTION_AT}, STOP AND RETHINK at {STOP_AT}"),
        ("comparing.md", f"With fewer than {MIN_HISTORY} batches (`MIN_HISTORY`) no verdict is given"),
        ("workloads.md", f"B against at least {words.get(MIN_HISTORY, str(MIN_HISTORY))} batches of runs of A's code"),
        ("README.md", f"least {words.get(MIN_HISTORY, str(MIN_HISTORY))} batches of earlier runs of the same code"),
        (
            "README.md",
            f"Runs less than {BATCH_GAP_SECONDS // 60} minutes apart are one batch; fewer than "
            f"{MIN_HISTORY} batches of history",
        ),
        ("README.md", f"keeps the chance that an unchanged one is flagged at {_percent(FAMILY_ERROR_RATE)}"),
        ("README.md", f"Counted runs are compared at a {_percent(COUNTS_THRESHOLD)} threshold by default"),
    ]


def test_the_numbers_pages_state_of_the_comparison_and_streaks_are_the_programs() -> None:
    pages = {p.name: " ".join(p.read_text(encoding="utf-8").split()) for p in PAGES}
    assert [f"{page}: {phrase!r}" for page, phrase in _page_claims() if phrase not in pages[page]] == []
