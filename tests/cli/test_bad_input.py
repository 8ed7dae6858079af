"""Hostile and broken input, case by case from the corpus in tests/data/bad/.

Each case of ``cases*.json`` is placed into a fresh copy of a small valid registry (the sample
records, one frozen evaluator, and an attempt ``measured`` linking one whole run folder), the
command is run in-process, and then: the exit code is the expected one, a line of the output
matches the case's regular expression (which names the file and the problem), nothing is a
traceback or echoes a huge input, and every file of the registry (and of the folder symlinks
lead to) is byte for byte what it was.

Keys of a case: ``name``; ``about``; ``files`` (registry-relative path -> corpus file placed
there; ``{evaluator}`` stands for the frozen evaluator's file name); ``remove`` (paths deleted
from the copy, in order); ``case_file`` (a corpus file that ``{case_file}`` in the command
names, left outside the registry); ``generate`` (a generator below, for input too large or
impossible to store as a file: 10 MB strings, 100000-deep nesting, symlinks); ``command``
(arguments after ``ptreg -r <registry>``); ``exit``; ``match`` (searched in each output line).
"""

from __future__ import annotations

import json
import os
import re
import shutil
import sqlite3
from collections.abc import Callable
from contextlib import closing
from pathlib import Path
from typing import Any

import pytest
from bad_bundles import BUNDLE_GENERATORS
from bad_outputs import OUTPUT_GENERATORS
from bad_second_round import SECOND_ROUND_GENERATORS

from helpers import (
    REPO,
    attempts_document,
    complete_record,
    freeze_evaluator,
    sample_records,
    to_old_layout,
    write_registry,
)
from ptreg import __version__
from ptreg.records.run_results import RunResults
from ptreg.store.evaluator_files import check_file
from ptreg.store.jsonio import dumps_pretty
from ptreg.store.names import INDEX_FILE

BAD = REPO / "tests" / "data" / "bad"
# One manifest per class of input (cases.json, cases-<class>.json), so that corpora grown in
# parallel merge without touching each other's file.
MANIFESTS = sorted(BAD.glob("cases*.json"))
CASES: list[dict[str, Any]] = [
    case for manifest in MANIFESTS for case in json.loads(manifest.read_text(encoding="utf-8"))["cases"]
]
RUN_ID = "20240101T000000Z"
RUN = f"runs/measured/{RUN_ID}"
TEN_MB = 10 * 1024 * 1024
# A report that echoed a generated input (10 MB, 100000 brackets) would be far longer.
MAX_OUTPUT = 20_000


# --------------------------------------------------------------------------- the base registry


def build_base(root: Path) -> None:
    write_registry(root, sample_records())
    ref = freeze_evaluator(root)
    frozen, problem = check_file(root / "evaluators" / f"{ref}.json")
    assert frozen is not None, problem
    measured = complete_record(
        "measured",
        status="not-tried",
        evidence=None,
        lesson=None,
        next_action=None,
        question="Does blocking still pay at the xl shapes?",
        evaluator=ref,
        budget={"wall_clock_seconds": 600.0},
        runs=[{"run_id": RUN_ID, "status": "complete", "evaluator": ref}],
    )
    (root / "measured.json").write_text(json.dumps(measured, indent=2), encoding="utf-8")
    results = RunResults(
        results_version=1,
        run_id=RUN_ID,
        attempt="measured",
        evaluator=ref,
        evaluator_sha256=frozen.sha256,
        evaluator_version=frozen.evaluator_version,
        spec=frozen.spec,
        budget={"wall_clock_seconds": 600.0},
        command=["ptreg", "run", "measured"],
        started_at="2024-01-01T00:00:00Z",
        finished_at="2024-01-01T00:01:00Z",
        status="complete",
        reason=None,
        ptreg_version=__version__,
        parity=[],
        cells=[],
    )
    folder = root / RUN
    folder.mkdir(parents=True)
    (folder / "results.json").write_text(dumps_pretty(results.model_dump(mode="json")), encoding="utf-8")
    (folder / "environment.json").write_text(dumps_pretty({"python": {"version": "3"}}), encoding="utf-8")


@pytest.fixture(scope="module")
def base_registry(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("bad-input-base") / "reg"
    build_base(root)
    return root


def state(top: Path) -> dict[str, Any]:
    """Every entry under ``top``, symlinks not followed: file bytes, 'dir', or the link target.
    Lock files and the query index are left out: working files, not the record (see helpers.snapshot)."""
    found: dict[str, Any] = {}
    for directory, dirs, files in os.walk(top):
        for name in sorted(dirs + files):
            if (name.startswith(".ptreg") and name.endswith(".lock")) or name.startswith(INDEX_FILE):
                continue
            path = Path(directory) / name
            key = path.relative_to(top).as_posix()
            if path.is_symlink():
                found[key] = ("symlink", os.readlink(path))
            elif path.is_dir():
                found[key] = "dir"
            else:
                found[key] = path.read_bytes()
    return found


# --------------------------------------------------------------------------- generators


def _evaluator_file(root: Path) -> Path:
    [path] = sorted((root / "evaluators").glob("*.json"))
    return path


def huge_evidence_record(root: Path, outside: Path, work: Path) -> None:
    record = complete_record("huge", evidence="x" * TEN_MB)
    (root / "huge.json").write_text(json.dumps(record), encoding="utf-8")


def long_evidence_record(root: Path, outside: Path, work: Path) -> None:
    record = complete_record("long", evidence="z" * 1_500_000)
    (root / "long.json").write_text(json.dumps(record), encoding="utf-8")


def huge_evaluator(root: Path, outside: Path, work: Path) -> None:
    path = _evaluator_file(root)
    path.write_text(path.read_text(encoding="utf-8") + " " * (1024 * 1024), encoding="utf-8")


def huge_evidence_import(root: Path, outside: Path, work: Path) -> Path:
    path = work / "huge-evidence.json"
    path.write_text(json.dumps(attempts_document([complete_record("huge", evidence="x" * TEN_MB)])), encoding="utf-8")
    return path


def long_evidence_import(root: Path, outside: Path, work: Path) -> Path:
    path = work / "long-evidence.json"
    path.write_text(json.dumps(attempts_document([complete_record("long", evidence="y" * 200_000)])), encoding="utf-8")
    return path


def deep_record(root: Path, outside: Path, work: Path) -> None:
    (root / "deep.json").write_text("[" * 100_000 + "]" * 100_000, encoding="utf-8")


def deep_import(root: Path, outside: Path, work: Path) -> Path:
    path = work / "deep-import.json"
    path.write_text("[" * 100_000 + "]" * 100_000, encoding="utf-8")
    return path


def deep_field_record(root: Path, outside: Path, work: Path) -> None:
    # 900 levels: just under Python's default recursion limit of 1000
    text = json.dumps(complete_record("deep-field"))[:-1] + ', "question": ' + "[" * 900 + "]" * 900 + "}"
    (root / "deep-field.json").write_text(text, encoding="utf-8")


def deep_field_import(root: Path, outside: Path, work: Path) -> Path:
    record = json.dumps(complete_record("deep-field"))[:-1] + ', "budget": ' + '{"a": ' * 900 + "1" + "}" * 900 + "}"
    document = json.dumps(attempts_document([]))
    path = work / "deep-field-import.json"
    path.write_text(document.replace('"attempts": []', f'"attempts": [{record}]'), encoding="utf-8")
    return path


def symlink_record_outside(root: Path, outside: Path, work: Path) -> None:
    target = outside / "escape.json"
    target.write_text(json.dumps(complete_record("escape")), encoding="utf-8")
    (root / "escape.json").symlink_to(target)


def symlink_evaluator_outside(root: Path, outside: Path, work: Path) -> None:
    # the same bytes, so only the symlink can be what is refused
    inside = _evaluator_file(root)
    target = outside / inside.name
    shutil.move(inside, target)
    inside.symlink_to(target)


def symlink_evaluators_dir_outside(root: Path, outside: Path, work: Path) -> None:
    target = outside / "evaluators"
    shutil.move(root / "evaluators", target)
    (root / "evaluators").symlink_to(target, target_is_directory=True)


def symlink_run_folder_outside(root: Path, outside: Path, work: Path) -> None:
    target = outside / "measured"
    shutil.move(root / "runs" / "measured", target)
    (root / "runs" / "measured").symlink_to(target, target_is_directory=True)


# ---- ptreg's own working files, and the paths they make it write or delete (cases-working-files.json):
# a site manifest naming paths outside its directory, working files that are symlinks, folders
# or another program's, journals that name paths through symlinks, forged index rows.


def _site_with_manifest(work: Path, pages: dict[str, Any]) -> Path:
    out = work / "site"
    out.mkdir()
    (out / ".ptreg-site.json").write_text(json.dumps({"format": "ptreg-site", "pages": pages}), encoding="utf-8")
    return out


def site_manifest_parent_path(root: Path, outside: Path, work: Path) -> Path:
    # the case: ../<registry>/registry.json, relative to the site
    return _site_with_manifest(work, {os.path.relpath(root / "registry.json", work / "site"): {}})


def site_manifest_absolute_path(root: Path, outside: Path, work: Path) -> Path:
    (outside / "victim.html").write_text("keep me", encoding="utf-8")
    return _site_with_manifest(work, {str(outside / "victim.html"): {}})


def site_manifest_not_a_page(root: Path, outside: Path, work: Path) -> Path:
    return _site_with_manifest(work, {"index.html": {}, "attempts/measured.json": {}})


def site_manifest_symlink(root: Path, outside: Path, work: Path) -> Path:
    target = outside / "manifest.json"
    target.write_text(json.dumps({"format": "ptreg-site", "pages": {"attempts/measured.html": {}}}), encoding="utf-8")
    out = work / "site"
    out.mkdir()
    (out / ".ptreg-site.json").symlink_to(target)
    return out


def site_folder_symlink(root: Path, outside: Path, work: Path) -> Path:
    """A site ptreg built, whose attempts/ is now a symlink to a folder outside holding a page."""
    out = _site_with_manifest(work, {"index.html": {}, "attempts/measured.html": {}})
    (outside / "measured.html").write_text("keep me", encoding="utf-8")
    (out / "attempts").symlink_to(outside, target_is_directory=True)
    return out


def _other_database(path: Path) -> None:
    with closing(sqlite3.connect(path)) as db, db:
        db.execute("CREATE TABLE precious (x TEXT)")
        db.execute("INSERT INTO precious VALUES ('keep me')")


def index_symlink_to_database(root: Path, outside: Path, work: Path) -> None:
    _other_database(outside / "other.db")
    (root / INDEX_FILE).unlink(missing_ok=True)
    (root / INDEX_FILE).symlink_to(outside / "other.db")


def index_dangling_symlink(root: Path, outside: Path, work: Path) -> None:
    (root / INDEX_FILE).unlink(missing_ok=True)
    (root / INDEX_FILE).symlink_to(outside / "created-here.db")


def index_journal_symlink(root: Path, outside: Path, work: Path) -> None:
    (outside / "victim.txt").write_text("keep me", encoding="utf-8")
    Path(f"{root / INDEX_FILE}-journal").symlink_to(outside / "victim.txt")


def index_wal_symlink(root: Path, outside: Path, work: Path) -> None:
    (outside / "victim.txt").write_text("keep me", encoding="utf-8")
    Path(f"{root / INDEX_FILE}-wal").symlink_to(outside / "victim.txt")


def index_is_directory(root: Path, outside: Path, work: Path) -> None:
    (root / INDEX_FILE).unlink(missing_ok=True)
    (root / INDEX_FILE).mkdir()


def index_foreign_database(root: Path, outside: Path, work: Path) -> None:
    (root / INDEX_FILE).unlink(missing_ok=True)
    _other_database(root / INDEX_FILE)


def index_forged_row(root: Path, outside: Path, work: Path) -> None:
    """The index built, then a row (and a files row) inserted for an attempt no file holds."""
    from ptreg.store.index import ATTEMPT_COLUMNS, open_index

    open_index(root).close()
    row = dict.fromkeys(ATTEMPT_COLUMNS)
    row.update(stem="ghost", raw_id="ghost", id="ghost", status="worked", family="runtime-perf", dumped=1)
    row.update(kind="runtime-benchmark", has_condition=0, ledger_time="2030-01-01T00:00:00Z")
    with closing(sqlite3.connect(root / INDEX_FILE)) as db, db:
        db.execute(f"INSERT INTO attempts VALUES ({', '.join('?' * len(row))})", tuple(row.values()))
        db.execute("INSERT INTO files VALUES ('ghost.json', 10, 1, 1, 1, 'ab', 1)")


def _journal(root: Path, renames: list[list[str]]) -> None:
    document = {"journal_version": 1, "operation": "import", "pid": 1, "renames": renames}
    (root / ".ptreg-journal.json").write_text(json.dumps(document), encoding="utf-8")


def journal_symlink(root: Path, outside: Path, work: Path) -> None:
    (outside / "journal.json").write_text(json.dumps({"journal_version": 1, "renames": []}), encoding="utf-8")
    (root / ".ptreg-journal.json").symlink_to(outside / "journal.json")


def journal_is_directory(root: Path, outside: Path, work: Path) -> None:
    (root / ".ptreg-journal.json").mkdir()


def journal_target_through_symlink(root: Path, outside: Path, work: Path) -> None:
    (root / ".staged.abc.tmp").write_text(json.dumps(complete_record("planted")), encoding="utf-8")
    (root / "shelf").symlink_to(outside, target_is_directory=True)
    _journal(root, [[".staged.abc.tmp", "shelf/planted.json"]])


def journal_staged_symlink(root: Path, outside: Path, work: Path) -> None:
    (outside / "planted.json").write_text(json.dumps(complete_record("planted")), encoding="utf-8")
    (root / ".staged.abc.tmp").symlink_to(outside / "planted.json")
    _journal(root, [[".staged.abc.tmp", "planted.json"]])


def _victim(outside: Path) -> Path:
    (outside / "victim.txt").write_text("keep me: a lock file opened with O_TRUNC would empty this", encoding="utf-8")
    return outside / "victim.txt"


def lock_symlink(root: Path, outside: Path, work: Path) -> None:
    (root / ".ptreg.lock").unlink(missing_ok=True)  # left by the base registry's writes
    (root / ".ptreg.lock").symlink_to(_victim(outside))


def lock_is_directory(root: Path, outside: Path, work: Path) -> None:
    (root / ".ptreg.lock").unlink(missing_ok=True)
    (root / ".ptreg.lock").mkdir()


def lock_holder_symlink(root: Path, outside: Path, work: Path) -> None:
    (root / ".ptreg.lock.holder").symlink_to(_victim(outside))


def run_lock_symlink(root: Path, outside: Path, work: Path) -> None:
    (root / ".ptreg-run-measured.lock").symlink_to(_victim(outside))


# ---- runs and locks (cases-locks.json)


def orphan_of_concluded(root: Path, outside: Path, work: Path) -> None:
    """A whole run of naive-baseline, concluded (failed) without it: as if its link never came."""
    results = json.loads((root / RUN / "results.json").read_text(encoding="utf-8"))
    results.update(attempt="naive-baseline", run_id="20240102T000000Z", command=["ptreg", "run", "naive-baseline"])
    folder = root / "runs" / "naive-baseline" / "20240102T000000Z"
    folder.mkdir(parents=True)
    (folder / "results.json").write_text(dumps_pretty(results), encoding="utf-8")
    shutil.copyfile(root / RUN / "environment.json", folder / "environment.json")


# ---- term files (cases-terms.json): each vocabulary term is vocabulary/<vocabulary>/<term>.json


def term_symlink_outside(root: Path, outside: Path, work: Path) -> None:
    (outside / "evil.json").write_text('{"term": "evil", "description": "Planted.", "order": 0}\n', encoding="utf-8")
    (root / "vocabulary" / "method" / "evil.json").symlink_to(outside / "evil.json")


def term_folder_symlink(root: Path, outside: Path, work: Path) -> None:
    shutil.move(root / "vocabulary", outside / "vocabulary")
    (root / "vocabulary").symlink_to(outside / "vocabulary")


def term_vocabulary_symlink(root: Path, outside: Path, work: Path) -> None:
    shutil.move(root / "vocabulary" / "method", outside / "method")
    (root / "vocabulary" / "method").symlink_to(outside / "method")


def term_file_is_folder(root: Path, outside: Path, work: Path) -> None:
    (root / "vocabulary" / "method" / "new-term.json").mkdir()


def old_layout(root: Path, outside: Path, work: Path) -> None:
    to_old_layout(root)


def bundle_with_zero_median_run(root: Path, outside: Path, work: Path) -> Path:
    """A bundle of the registry whose run has medians of 0, as an older ptreg exported it."""
    from ptreg.store.bundle import write_bundle
    from ptreg.store.directory import load_directory

    source = work / "source"
    shutil.copytree(root, source, symlinks=True)
    (source / RUN / "results.json").write_bytes((BAD / "values-run-medians-zero.json").read_bytes())
    target = work / "zero-medians.tar.gz"
    write_bundle(source, load_directory(source), target)
    return target


Generator = Callable[[Path, Path, Path], Path | None]
GENERATORS: dict[str, Generator] = {
    f.__name__: f
    for f in (
        huge_evidence_record,
        long_evidence_record,
        huge_evaluator,
        huge_evidence_import,
        long_evidence_import,
        deep_record,
        deep_import,
        deep_field_record,
        deep_field_import,
        symlink_record_outside,
        symlink_evaluator_outside,
        symlink_evaluators_dir_outside,
        symlink_run_folder_outside,
        # ptreg's own working files
        site_manifest_parent_path,
        site_manifest_absolute_path,
        site_manifest_not_a_page,
        site_manifest_symlink,
        site_folder_symlink,
        index_symlink_to_database,
        index_dangling_symlink,
        index_journal_symlink,
        index_wal_symlink,
        index_is_directory,
        index_foreign_database,
        index_forged_row,
        journal_symlink,
        journal_is_directory,
        journal_target_through_symlink,
        journal_staged_symlink,
        lock_symlink,
        lock_is_directory,
        lock_holder_symlink,
        run_lock_symlink,
        orphan_of_concluded,
        bundle_with_zero_median_run,
        term_symlink_outside,
        term_folder_symlink,
        term_vocabulary_symlink,
        term_file_is_folder,
        old_layout,
    )
}


# --------------------------------------------------------------------------- the corpus itself


GENERATORS.update(BUNDLE_GENERATORS)  # tests/cli/bad_bundles.py
GENERATORS.update(OUTPUT_GENERATORS)  # tests/cli/bad_outputs.py
GENERATORS.update(SECOND_ROUND_GENERATORS)  # tests/cli/bad_second_round.py


def test_corpus_is_large_and_consistent() -> None:
    assert len(CASES) >= 40
    names = [c["name"] for c in CASES]
    assert len(names) == len(set(names))
    used = set()
    for case in CASES:
        assert set(case) <= {"name", "about", "files", "remove", "case_file", "generate", "command", "exit", "match"}, (
            case
        )
        assert case["exit"] in (0, 1, 2) and case["command"], case["name"]
        re.compile(case["match"])
        used.update(case.get("files", {}).values())
        if "case_file" in case:
            used.add(case["case_file"])
        if "generate" in case:
            assert case["generate"] in GENERATORS, case["name"]
    on_disk = {p.name for p in BAD.iterdir()} - {m.name for m in MANIFESTS}
    assert used == on_disk, (sorted(on_disk - used), sorted(used - on_disk))
    for name in on_disk:
        assert (BAD / name).stat().st_size < 100_000, name


def test_base_registry_is_valid(base_registry: Path, tmp_path: Path, cli) -> None:
    """Every failure below is then the case's doing."""
    root = tmp_path / "reg"
    shutil.copytree(base_registry, root, symlinks=True)
    before = state(root)
    for command in (["validate"], ["evaluator", "verify"], ["show", "measured"], ["list"]):
        result = cli("-r", root, *command)
        assert result.code == 0, (command, result.out, result.err)
        assert result.err == "", (command, result.err)
    assert "The run's results cannot be read" not in cli("-r", root, "show", "measured").out
    assert state(root) == before


# --------------------------------------------------------------------------- each case


@pytest.mark.parametrize("case", CASES, ids=[c["name"] for c in CASES])
def test_bad_input(case: dict[str, Any], base_registry: Path, tmp_path: Path, cli) -> None:
    root = tmp_path / "reg"
    shutil.copytree(base_registry, root, symlinks=True)
    outside = tmp_path / "outside"
    outside.mkdir()
    work = tmp_path / "work"
    work.mkdir()
    evaluator = _evaluator_file(root).name
    for relative in case.get("remove", []):
        path = root / relative
        path.rmdir() if path.is_dir() else path.unlink()
    for relative, corpus in case.get("files", {}).items():
        target = root / relative.replace("{evaluator}", evaluator)
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_bytes((BAD / corpus).read_bytes())
    case_file = BAD / case["case_file"] if "case_file" in case else None
    if "generate" in case:
        case_file = GENERATORS[case["generate"]](root, outside, work) or case_file
    command = [str(case_file) if arg == "{case_file}" else arg for arg in case["command"]]
    before = (state(root), state(outside))

    result = cli("-r", root, *command)

    output = result.out + result.err
    shown = output if len(output) < 2000 else output[:2000] + "..."
    assert result.code == case["exit"], (result.code, shown)
    assert "Traceback" not in output, shown
    assert len(output) < MAX_OUTPUT, f"{len(output)} characters of output: {shown}"
    matching = [line for line in output.splitlines() if re.search(case["match"], line)]
    assert matching, f"no line matches {case['match']!r} in:\n{shown}"
    assert matching[0].isprintable(), repr(matching[0])
    errors = [line for line in result.err.splitlines() if line.startswith("ptreg: error: ")]
    if result.code == 2:  # unusable input: one line on stderr, nothing else
        assert result.err.strip("\n").splitlines() == errors and len(errors) == 1, shown
    elif result.code == 1 and case["command"][0] in ("validate", "evaluator", "repair"):
        # a check that ran and found problems (or repair, what it leaves for a person) reports them, not an error
        assert errors == [], shown
    else:
        assert len(errors) == result.code, shown
    assert (state(root), state(outside)) == before, "the registry changed"


# --------------------------------------------------------------------------- beyond the CLI


def test_deep_values_do_not_crash_the_validators() -> None:
    """Values nested just under the recursion limit, handed to the models and the committed
    JSON Schema directly (a library caller need not go through parse_json)."""
    from jsonschema import Draft202012Validator

    from helpers import SCHEMAS
    from ptreg.records.registry import parse_record

    deep: Any = []
    for _ in range(900):
        deep = [deep]
    nested: Any = 1
    for _ in range(900):
        nested = {"a": nested}
    for field, value in (("bases", deep), ("budget", nested), ("colour", deep)):
        record = complete_record("deep", **{field: value})
        parsed, problems = parse_record(record, file="deep.json")
        assert parsed.attempt is None and problems
        assert all(p.pointer.startswith(f"/{field}") and "\n" not in p.message for p in problems)
        validator = Draft202012Validator(json.loads((SCHEMAS / "attempt.schema.json").read_text(encoding="utf-8")))
        assert list(validator.iter_errors(record))


def test_symlink_inside_the_registry_is_read(base_registry: Path, tmp_path: Path, cli) -> None:
    """A symlink that stays inside the registry is an ordinary file to read."""
    root = tmp_path / "reg"
    shutil.copytree(base_registry, root, symlinks=True)
    (root / "shelf").mkdir()
    (root / "shelf" / "kept.json").write_text(json.dumps(complete_record("kept")), encoding="utf-8")
    (root / "kept.json").symlink_to(Path("shelf") / "kept.json")
    result = cli("-r", root, "validate")
    assert result.code == 0, result.out
    assert "kept" in cli("-r", root, "show", "kept").out


def test_fifo_named_like_a_record_is_refused_not_waited_on(tmp_path: Path) -> None:
    from ptreg.errors import PtregError
    from ptreg.store.jsonio import read_json

    fifo = tmp_path / "pipe.json"
    os.mkfifo(fifo)
    with pytest.raises(PtregError) as caught:
        read_json(fifo)
    assert caught.value.message == f"{fifo}: not a regular file; not read"
