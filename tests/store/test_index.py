"""The derived query index (ptreg/store/index.py): it answers every query exactly as a full read
of the record files does, sees every change to them (hand edits, deletions, a `git pull`), is
rebuilt when it is corrupt, foreign or of another schema, and never leaves the registry."""

from __future__ import annotations

import json
import os
import shutil
import sqlite3
import subprocess
import sys
import tarfile
from collections.abc import Callable
from contextlib import AbstractContextManager, closing, nullcontext
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from helpers import (
    LIST_FILTERS,
    by_full_read,
    by_index,
    complete_record,
    failed_record,
    plan_flags,
    sample_records,
    write_registry,
)
from helpers import assert_index_agrees as assert_agrees
from ptreg.gate.admission import registry_state
from ptreg.records.attempt import Attempt
from ptreg.records.ledger import Filter, listed
from ptreg.store import index as index_module
from ptreg.store.directory import IGNORED, IGNORED_BEFORE_INDEX, load_directory
from ptreg.store.full_read import FullRead
from ptreg.store.index import (
    APPLICATION_ID,
    INDEX_SCHEMA,
    RACY_NS,
    connection,
    file,
    freshness,
    index_path,
    listing,
    open_index,
)
from ptreg.store.index.freshness import _stamps_digest
from ptreg.views.queries import list_row, select

OBJECTIVES = ["training-step-time", "peak-memory"]
METHODS = ["cache-blocking", "vectorization", "multithreading"]
FAMILIES = ["runtime-perf", "memory"]
QUESTIONS = ["Does blocking pay off at xl?", "does blocking pay off at XL", "Is the backward pass the bound?"]
STATUSES = ["worked", "failed", "regressed", "inconclusive", "not-tried", "worked-with-caveat"]


def chain_records() -> list[dict[str, Any]]:
    records = sample_records()
    records += [
        failed_record("c1", objective="peak-memory", methods=["vectorization"]),
        failed_record("c2", objective="peak-memory", varied_from="c1", varied="tile 64 -> 128"),
        failed_record("c3", objective="peak-memory", varied_from="c2", varied="tile 128 -> 256"),
        complete_record("c4", objective="peak-memory", varied_from="c2", varied="unroll", status="not-tried"),
    ]
    return records


@pytest.fixture
def registry(tmp_path: Path) -> Path:
    return write_registry(tmp_path / "reg", chain_records())


# --------------------------------------------------------------------------- the same answers


def test_the_index_answers_as_a_full_read(registry: Path) -> None:
    assert_agrees(registry)
    assert index_path(registry).exists()
    assert_agrees(registry)  # and again from the index as it was left


def test_full_read_mode_answers_as_the_index(registry: Path) -> None:
    """PTREG_INDEX=off (store/full_read.py) gives the same summaries, lineages and counts."""
    full, index = FullRead(registry), open_index(registry)
    try:
        assert full.summaries() == index.summaries()
        assert (full.records(), full.valid(), full.problems()) == (index.records(), index.valid(), index.problems())
        for attempt_id in full.ids():
            assert full.lineage_ids(attempt_id) == index.lineage_ids(attempt_id)
        assert full.raw_ids() == index.raw_ids()
        assert full.with_condition() == index.with_condition()
    finally:
        index.close()


def test_a_summary_is_what_the_record_says(registry: Path) -> None:
    index = open_index(registry)
    try:
        from_records = sorted((a.summary() for a in load_directory(registry).attempts), key=lambda a: a.ledger)
        assert [a._replace(stem=None) for a in index.summaries()] == from_records
        assert [a.stem for a in index.summaries()] == [a.id for a in from_records]  # each in its own file
    finally:
        index.close()


def test_the_attempts_columns_are_the_tables(registry: Path) -> None:
    with closing(open_index(registry)) as index:
        columns = [r[1] for r in index.db.execute("PRAGMA table_info(attempts)")]
    assert tuple(columns) == index_module.ATTEMPT_COLUMNS


def test_terms_with_control_characters_are_narrowed_as_a_full_read(registry: Path) -> None:
    """A list of terms where one holds a control character is kept as JSON (records/ledger.py);
    `list` narrows by a method or a base all the same."""
    odd = {"methods": ["tab\there", "vectorization"], "bases": ["unit\x1fseparated", "matmul-f32"]}
    (registry / "c5.json").write_text(json.dumps(complete_record("c5", **odd)), encoding="utf-8")
    attempts = sorted(load_directory(registry).attempts, key=lambda a: a.ledger)
    everything = [listed(a.summary()._replace(stem=a.id)) for a in attempts]  # each in its own file
    with closing(open_index(registry)) as index:
        for criteria in (
            {"methods": ("tab\there",)},
            {"methods": ("vectorization",)},
            {"methods": ("tab",)},
            {"bases": ("unit\x1fseparated",)},
            {"bases": ("unit",), "methods": ("vectorization", "cache-blocking")},
        ):
            wanted = select(everything, Filter(**criteria))
            assert select(index.candidates(Filter(**criteria)), Filter(**criteria)) == wanted, criteria
        assert next(a for a in index.candidates(Filter()) if a.id == "c5").bases == odd["bases"]
        # SQL cannot print or decide methods kept as JSON: `list` takes the path that can
        assert index.list_rows(Filter(methods=("vectorization",))) is None
        assert index.list_rows(Filter(statuses=("failed",))) is not None  # c5 is not among them


def test_list_prints_from_sql_what_the_filter_over_every_attempt_gives(registry: Path) -> None:
    """`list`'s table straight from SQL (`Index.list_rows`) is, row for row, what the one
    filter and `list_row` make of every attempt; a method SQL cannot match exactly is left to
    the filter."""
    attempts = sorted(load_directory(registry).attempts, key=lambda a: a.ledger)
    with closing(open_index(registry)) as index:
        for criteria in LIST_FILTERS:
            wanted = [list_row(a) for a in select(attempts, Filter(**criteria))]
            rows = index.list_rows(Filter(**criteria))
            assert rows == (None if criteria.get("bases") else wanted), criteria
        assert any(a.objective is None for a in attempts)  # printed as "", not as unknown
        for term in ("", "tab\there", "vector\x1fization"):
            assert index.list_rows(Filter(methods=(term,))) is None


# --------------------------------------------------------------------------- changes to the files


def _rewrite(path: Path, change: dict[str, Any]) -> None:
    raw = json.loads(path.read_text(encoding="utf-8"))
    raw.update(change)
    path.write_text(json.dumps(raw, indent=2), encoding="utf-8")


def test_a_hand_edit_is_seen_by_the_next_command(registry: Path) -> None:
    open_index(registry).close()
    _rewrite(registry / "c3.json", {"status": "worked", "lesson": "It worked after all."})
    assert_agrees(registry)
    assert by_index(registry)["streaks"] == by_full_read(registry)["streaks"]


def test_an_edit_that_keeps_size_and_mtime_is_seen(registry: Path) -> None:
    """An editor that writes in place, and a clock tick that hides the change in the mtime."""
    open_index(registry).close()
    path = registry / "c2.json"
    before = os.stat(path)
    text = path.read_text(encoding="utf-8")
    edited = text.replace('"failed"', '"faile2"').replace('"faile2"', '"worked"'.ljust(len('"failed"')))
    assert len(edited.encode()) == len(text.encode()) and edited != text
    with open(path, "r+", encoding="utf-8") as handle:  # same inode
        handle.write(edited)
    os.utime(path, ns=(before.st_atime_ns, before.st_mtime_ns))
    assert os.stat(path).st_size == before.st_size and os.stat(path).st_mtime_ns == before.st_mtime_ns
    assert_agrees(registry)


def test_a_change_within_one_clock_tick_is_rehashed(registry: Path) -> None:
    """Where a file system's clock is coarse, a change right after the index looked keeps the
    whole stamp: a file changed within RACY_NS of that moment is hashed again."""
    open_index(registry).close()
    path = registry / "c1.json"
    text = path.read_text(encoding="utf-8")
    edited = text.replace('"failed"', '"regressed"'[: len('"failed"') - 1] + '"')
    assert len(edited) == len(text)
    path.write_text(edited, encoding="utf-8")
    info = os.stat(path)
    seen = info.st_ctime_ns + RACY_NS // 2
    digest = _stamps_digest(listing(registry), seen + 2 * RACY_NS)  # every stamp as it is now
    with sqlite3.connect(index_path(registry)) as db:  # as if the stamp had not moved
        db.execute(
            "UPDATE files SET size = ?, mtime_ns = ?, ctime_ns = ?, ino = ?, seen_ns = ? WHERE name = 'c1.json'",
            (info.st_size, info.st_mtime_ns, info.st_ctime_ns, info.st_ino, seen),
        )
        db.execute("UPDATE meta SET value = ? WHERE key = 'checked'", (f"{seen} {digest}",))
        assert db.execute("SELECT changes()").fetchone() == (1,)
        _as_ptreg_wrote(db, registry)
    index = open_index(registry)
    try:
        assert index.refresh.reread == ["c1.json"]
    finally:
        index.close()
    assert_agrees(registry)


def _as_ptreg_wrote(db: sqlite3.Connection, root: Path) -> None:
    """Within a transaction that edits the index: sign it as ptreg's own writes do, so that the
    edit stands for a state ptreg could have left (a test of what the stamps alone decide)."""
    counter = file.change_counter(root)
    db.execute("INSERT OR REPLACE INTO meta VALUES ('written', ?)", (str(counter + 1),))


def test_a_deleted_file_is_gone_from_the_answers(registry: Path) -> None:
    open_index(registry).close()
    (registry / "c2.json").unlink()
    index = open_index(registry)
    try:
        assert index.refresh.removed == ["c2.json"]
        assert index.summary("c2") is None
    finally:
        index.close()
    assert_agrees(registry)


def test_a_pull_that_changes_100_files_rereads_exactly_those(tmp_path: Path) -> None:
    records = [complete_record(f"a{i:04d}", lesson=f"lesson {i}") for i in range(400)]
    root = write_registry(tmp_path / "reg", records)
    open_index(root).close()
    changed = {f"a{i:04d}.json" for i in range(0, 400, 4)}
    staged = tmp_path / "incoming"  # as git does: each changed file written anew
    staged.mkdir()
    for name in changed:
        raw = json.loads((root / name).read_text(encoding="utf-8"))
        raw["status"] = "failed"
        raw["failure_reason"] = "pulled"
        raw["failure_reason_confidence"] = "inferred"
        (staged / name).write_text(json.dumps(raw, indent=2), encoding="utf-8")
        os.replace(staged / name, root / name)
    (root / "a0001.json").unlink()
    (root / "zz-new.json").write_text(json.dumps(complete_record("zz-new")), encoding="utf-8")
    index = open_index(root)
    try:
        assert set(index.refresh.reread) == changed | {"zz-new.json"}
        assert index.refresh.removed == ["a0001.json"]
    finally:
        index.close()
    assert_agrees(root)


def test_a_lookup_reads_only_the_row_it_looks_up(tmp_path: Path) -> None:
    """The kept listing and a large kept result spill to overflow pages; looking up any other key
    of their tables never reads those pages (the check of every command looks up a key beside the
    listing, which is megabytes at 100,000 files). Proven by overwriting the pages: SQLite would
    report the file damaged on reading them."""
    root = write_registry(tmp_path / "reg", [complete_record(f"a{i:04d}") for i in range(400)])
    index = open_index(root)
    try:
        index.remembered("large", lambda: "x" * 50_000)
        index.remembered("small", lambda: "kept")
    finally:
        index.close()
    with closing(sqlite3.connect(index_path(root))) as db:
        page_size = db.execute("PRAGMA page_size").fetchone()[0]
        try:
            db.execute("SELECT 1 FROM dbstat LIMIT 1")
        except sqlite3.OperationalError:
            pytest.skip("this SQLite is built without the dbstat table, which names the spilled pages")
        spilled = db.execute(
            "SELECT name, pageno FROM dbstat WHERE name IN ('meta', 'derived') AND pagetype = 'overflow'"
        ).fetchall()
    assert {name for name, _ in spilled} == {"meta", "derived"}
    with open(index_path(root), "r+b") as file:
        for _, page in spilled:
            file.seek((page - 1) * page_size)
            file.write(b"\xff" * page_size)
    with closing(sqlite3.connect(index_path(root))) as db:
        assert db.execute("SELECT count(*) FROM meta WHERE key IN ('checked', 'registry')").fetchone() == (2,)
        stamp = connection.code_stamp()
        assert db.execute("SELECT value FROM derived WHERE key = ?", (f"small {stamp}",)).fetchone() == ('"kept"',)
        with pytest.raises(sqlite3.DatabaseError, match="malformed"):  # the pages were read: damaged
            db.execute("SELECT value FROM meta WHERE key = 'listing'").fetchone()


def test_bad_records_are_the_same_problems(registry: Path) -> None:
    open_index(registry).close()
    (registry / "broken.json").write_text("{", encoding="utf-8")
    (registry / "misnamed.json").write_text(json.dumps(complete_record("other")), encoding="utf-8")
    (registry / "c1.json").write_text(json.dumps(complete_record("c1", status="bogus")), encoding="utf-8")
    assert_agrees(registry)
    (registry / "broken.json").write_text(json.dumps(complete_record("broken")), encoding="utf-8")
    assert_agrees(registry)


def test_an_invalid_registry_json_is_refused_as_before(cli, registry: Path) -> None:
    open_index(registry).close()
    (registry / "registry.json").write_text("[]", encoding="utf-8")
    for args in (["list"], ["streaks"], ["lineage", "c2"], ["coverage"]):
        result = cli("-r", registry, *args)
        assert result.code == 2, result
        assert "registry.json: expected a JSON object, got array" in result.err


# --------------------------------------------------------------------------- a bad index is rebuilt


def _damage_header(path: Path) -> None:
    data = bytearray(path.read_bytes())
    data[:16] = b"not a database!!"
    path.write_bytes(bytes(data))


def _foreign(path: Path) -> None:
    path.unlink()
    with sqlite3.connect(path) as db:
        db.execute("CREATE TABLE photos (id INTEGER)")


def _other_schema(path: Path) -> None:
    with sqlite3.connect(path) as db:
        db.execute(f"PRAGMA user_version = {INDEX_SCHEMA + 1}")


def _missing_table(path: Path) -> None:
    with sqlite3.connect(path) as db:
        db.execute("DROP TABLE runs")


def _truncated(path: Path) -> None:
    data = path.read_bytes()
    path.write_bytes(data[: len(data) // 3])


def _garbage(path: Path) -> None:
    path.write_bytes(os.urandom(5000))


@pytest.mark.parametrize("damage", [_damage_header, _other_schema, _missing_table, _truncated, _garbage])
def test_a_corrupt_foreign_or_outdated_index_is_rebuilt_never_used(cli, registry: Path, damage) -> None:
    expected = cli("-r", registry, "streaks", "--json").out
    damage(index_path(registry))
    result = cli("-r", registry, "streaks", "--json")
    assert result.code == 0, result.err
    assert result.out == expected
    assert_agrees(registry)
    with sqlite3.connect(index_path(registry)) as db:
        assert db.execute("PRAGMA application_id").fetchone()[0] == APPLICATION_ID
        assert db.execute("PRAGMA user_version").fetchone()[0] == INDEX_SCHEMA
    assert cli("-r", registry, "index", "check").code == 0


def test_an_index_that_cannot_be_written_answers_from_memory(
    cli, registry: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    def read_only(root: Path) -> sqlite3.Connection:  # as a read-only or full disk would refuse it
        return sqlite3.connect(f"file:{index_path(root)}?mode=ro", uri=True, isolation_level=None)

    monkeypatch.setattr(connection, "connect", read_only)
    index = open_index(registry)
    try:
        assert index.refresh.in_memory
    finally:
        index.close()
    assert_agrees(registry)
    result = cli("-r", registry, "list")
    assert result.code == 0 and f"of {len(chain_records())} attempts" in result.out, result


# --------------------------------------------------------------------------- never another's file


def _symlink_to_another_database(registry: Path, outside: Path) -> Path:
    target = outside / "other.db"
    with closing(sqlite3.connect(target)) as db, db:
        db.execute("CREATE TABLE precious (x)")
        db.execute("INSERT INTO precious VALUES ('keep me')")
    index_path(registry).unlink(missing_ok=True)
    index_path(registry).symlink_to(target)
    return target


def _dangling_symlink(registry: Path, outside: Path) -> Path:
    index_path(registry).unlink(missing_ok=True)
    index_path(registry).symlink_to(outside / "not-yet.db")
    return outside / "not-yet.db"


def _journal_symlink(registry: Path, outside: Path) -> Path:
    target = outside / "victim.txt"
    target.write_text("keep me\n", encoding="utf-8")
    Path(f"{index_path(registry)}-journal").symlink_to(target)
    return target


def _wal_symlink(registry: Path, outside: Path) -> Path:
    target = outside / "victim.txt"
    target.write_text("keep me\n", encoding="utf-8")
    Path(f"{index_path(registry)}-wal").symlink_to(target)
    return target


def _a_directory(registry: Path, outside: Path) -> Path:
    index_path(registry).unlink(missing_ok=True)
    index_path(registry).mkdir()
    (index_path(registry) / "kept").write_text("keep me\n", encoding="utf-8")
    return index_path(registry) / "kept"


def _another_programs_database(registry: Path, outside: Path) -> Path:
    index_path(registry).unlink(missing_ok=True)
    with closing(sqlite3.connect(index_path(registry))) as db, db:
        db.execute("CREATE TABLE photos (id INTEGER)")
        db.execute("INSERT INTO photos VALUES (1)")
    return index_path(registry)


@pytest.mark.parametrize(
    "plant",
    [
        _symlink_to_another_database,
        _dangling_symlink,
        _journal_symlink,
        _wal_symlink,
        _a_directory,
        _another_programs_database,
    ],
)
@pytest.mark.parametrize("command", [["list"], ["streaks"], ["index"], ["index", "rebuild"], ["index", "check"]])
def test_an_index_name_holding_what_ptreg_did_not_make_is_refused_and_left_alone(
    cli, registry: Path, tmp_path: Path, plant, command: list[str]
) -> None:
    """A symlink (to a database, or dangling), a folder, or another program's SQLite database
    under the index's name or its journals': one line, exit 2, and neither it nor what it
    points to changes (SQLite would follow the symlink and drop the other database's tables)."""
    open_index(registry).close()
    outside = tmp_path / "outside"
    outside.mkdir()
    target = plant(registry, outside)
    planted = {p.name: (os.readlink(p) if p.is_symlink() else p.is_dir()) for p in registry.glob(".ptreg-index*")}
    before = target.read_bytes() if target.is_file() else None
    result = cli("-r", registry, *command)
    assert result.code == 2, (result.out, result.err)
    lines = result.err.splitlines()
    assert len(lines) == 1 and lines[0].startswith(f"ptreg: error: {registry}/.ptreg-index.sqlite"), lines
    assert "left alone" in lines[0] and "Traceback" not in result.err
    assert (target.read_bytes() if target.is_file() else None) == before
    assert not (outside / "not-yet.db").exists()
    after = {p.name: (os.readlink(p) if p.is_symlink() else p.is_dir()) for p in registry.glob(".ptreg-index*")}
    assert after == planted


def test_rows_without_a_file_are_never_believed(cli, registry: Path) -> None:
    """Rows inserted by hand for an attempt no file holds, with a files row to match: never
    listed, never counted; the index is rebuilt from the files."""
    count = len(chain_records())
    expected = cli("-r", registry, "list", "--json").out
    with closing(sqlite3.connect(index_path(registry))) as db, db:
        stem = "ghost"
        row = dict.fromkeys(index_module.ATTEMPT_COLUMNS)
        row.update(stem=stem, raw_id=stem, id=stem, status="worked", family="runtime-perf", kind="runtime-benchmark")
        row.update(ledger_time="2030-01-01T00:00:00Z", dumped=1, has_condition=0)
        db.execute(f"INSERT INTO attempts VALUES ({', '.join('?' * len(row))})", tuple(row.values()))
        db.execute("INSERT INTO files VALUES ('ghost.json', 10, 1, 1, 1, 'ab', 1)")
    status = cli("-r", registry, "index", "--json").json()  # the "up to date; 15 record files"
    assert status["records"] == count and status["valid"] == count
    assert status["rebuilt"] == "the index file was changed by another program since ptreg wrote it"
    assert cli("-r", registry, "index", "check").code == 0
    assert cli("-r", registry, "list", "--json").out == expected
    lineage = cli("-r", registry, "lineage", "ghost")
    assert lineage.code == 2 and "no attempt 'ghost'" in lineage.err


def test_a_status_edited_in_the_index_does_not_change_the_gate(cli, registry: Path) -> None:
    """A negative status made positive in the index (and a kept streak result forged) by hand:
    the streaks, and the gate's streak check that reads them, answer from the files."""
    expected = cli("-r", registry, "streaks", "--json").out
    with closing(sqlite3.connect(index_path(registry))) as db, db:
        db.execute("UPDATE attempts SET status = 'worked' WHERE status IN ('failed', 'regressed')")
        db.execute("UPDATE derived SET value = '[]'")
    assert cli("-r", registry, "streaks", "--json").out == expected
    rebuilt = cli("-r", registry, "index", "--json").json()
    assert rebuilt["rebuilt"] is None and rebuilt["reread"] == 0
    with closing(sqlite3.connect(index_path(registry))) as db, db:
        db.execute("UPDATE attempts SET status = 'worked' WHERE status IN ('failed', 'regressed')")
    check = cli("-r", registry, "index", "check")
    assert check.code == 1 and ".ptreg-index.sqlite: changed by another program" in check.out, check.out
    index = open_index(registry)
    try:
        assert index.refresh.rebuilt == "the index file was changed by another program since ptreg wrote it"
    finally:
        index.close()
    assert_agrees(registry)


def test_deleting_the_index_at_any_time_is_harmless(cli, registry: Path) -> None:
    expected = cli("-r", registry, "list", "--json").out
    index_path(registry).unlink()
    assert cli("-r", registry, "list", "--json").out == expected


# --------------------------------------------------------------------------- ptreg index


def test_index_check_finds_a_stale_and_a_wrong_index(cli, registry: Path) -> None:
    assert cli("-r", registry, "index").code == 0
    assert cli("-r", registry, "index", "check").code == 0
    _rewrite(registry / "c1.json", {"lesson": "edited by hand"})
    stale = cli("-r", registry, "index", "check", "--json")
    assert stale.code == 1
    assert stale.json()["differences"] == [{"file": "c1.json", "what": "stale"}]
    assert cli("-r", registry, "list").code == 0  # any command brings it up to date
    assert cli("-r", registry, "index", "check").code == 0
    with sqlite3.connect(index_path(registry)) as db:  # a wrong row under a matching stamp
        db.execute("UPDATE attempts SET status = 'worked' WHERE id = 'c2'")
    wrong = cli("-r", registry, "index", "check")
    assert wrong.code == 1 and "c2.json: the index holds something other than the file says" in wrong.out
    rebuilt = cli("-r", registry, "index", "rebuild", "--json")
    assert rebuilt.code == 0 and rebuilt.json()["reread"] == len(chain_records()) + 1  # and registry.json
    assert cli("-r", registry, "index", "check").code == 0


def test_index_reports_what_it_did(cli, registry: Path) -> None:
    first = cli("-r", registry, "index", "--json").json()
    count = len(chain_records())
    assert first["rebuilt"] == "no index yet" and first["records"] == count and first["valid"] == count
    again = cli("-r", registry, "index", "--json").json()
    assert again["rebuilt"] is None and again["reread"] == 0 and again["bytes"] > 0
    text = cli("-r", registry, "index").out
    assert "up to date" in text and f"{count} record files ({count} valid)" in text


def test_index_of_no_registry_is_one_line(cli, tmp_path: Path) -> None:
    for args in (["index"], ["index", "rebuild"], ["index", "check"]):
        result = cli("-r", tmp_path / "nothing", *args)
        assert result.code == 2 and result.err.count("\n") == 1 and "not a registry directory" in result.err


def test_full_read_mode_uses_no_index(cli, registry: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    expected = cli("-r", registry, "streaks").out
    index_path(registry).unlink()
    monkeypatch.setenv("PTREG_INDEX", "off")
    assert cli("-r", registry, "streaks").out == expected
    assert not index_path(registry).exists()


# --------------------------------------------------------------------------- writes keep it current


def propose_fresh(cli, registry: Path, ref: str) -> None:
    """`ptreg new` of an attempt "fresh" that the gate admits."""
    result = cli(
        "-r", registry, "new", "--id", "fresh", "--name", "Fresh", "--family", "runtime-perf",
        "--kind", "runtime-benchmark", "--objective", "training-step-time", "--method", "vectorization",
        "--question", "Does a fresh question pass?", "--evaluator", ref, "--budget-seconds", "60",
        "--tracking-issue", "#99", *plan_flags(registry, ref), "--no-input",
    )  # fmt: skip
    assert result.code == 0, result.err


def test_ptregs_own_writes_update_the_index_before_the_lock_is_released(cli, registry: Path) -> None:
    from helpers import freeze_evaluator

    ref = freeze_evaluator(registry)
    open_index(registry).close()
    propose_fresh(cli, registry, ref)
    with sqlite3.connect(index_path(registry)) as db:
        assert db.execute("SELECT status FROM attempts WHERE id = 'fresh'").fetchone() == ("not-tried",)
    index = open_index(registry)
    try:
        assert index.refresh.reread == []  # nothing left for the reader to re-read
    finally:
        index.close()
    assert_agrees(registry)


def test_the_admission_digest_from_the_index_is_the_digest_of_the_files(registry: Path) -> None:
    from helpers import freeze_evaluator

    freeze_evaluator(registry)
    index = open_index(registry)
    try:
        hashes = index.hashes()
        count = len(chain_records())
        assert registry_state(registry, count, hashes=hashes) == registry_state(registry, count)
        assert registry_state(registry, count - 1, "c1", hashes) == registry_state(registry, count - 1, "c1")
    finally:
        index.close()


# --------------------------------------------------------------------------- a working file, never the record


def test_the_index_is_git_ignored_and_never_exported(cli, registry: Path, tmp_path: Path) -> None:
    import fnmatch

    assert any(fnmatch.fnmatch(".ptreg-index.sqlite", p) for p in IGNORED.splitlines() if p and p[0] != "#")
    assert any(fnmatch.fnmatch(".ptreg-index.sqlite-journal", p) for p in IGNORED.splitlines() if p and p[0] != "#")
    open_index(registry).close()
    bundle = tmp_path / "out.tar.gz"
    assert cli("-r", registry, "export", "--bundle", bundle).code == 0
    with tarfile.open(bundle) as tar:
        assert not [n for n in tar.getnames() if "sqlite" in n]
    folder = tmp_path / "out-folder"
    assert cli("-r", registry, "export", "--bundle", folder).code == 0
    assert not list(folder.rglob("*sqlite*"))
    copy = tmp_path / "copy"
    result = cli("-r", copy, "import", registry)  # another registry directory, its index beside it
    assert result.code == 0, result.err
    assert not index_path(copy).exists() or index_path(copy).read_bytes() != index_path(registry).read_bytes()
    assert_agrees(copy)


def test_repair_adds_the_index_to_an_old_gitignore(cli, registry: Path) -> None:
    (registry / ".gitignore").write_text(IGNORED_BEFORE_INDEX, encoding="utf-8")
    result = cli("-r", registry, "repair")
    assert result.code == 0 and ".gitignore" in result.out, result
    assert (registry / ".gitignore").read_text(encoding="utf-8") == IGNORED
    (registry / ".gitignore").write_text("# mine\n", encoding="utf-8")
    assert cli("-r", registry, "repair").code == 0
    assert (registry / ".gitignore").read_text(encoding="utf-8") == "# mine\n"  # the user's own is kept


# --------------------------------------------------------------------------- random registries, random edits


def _record(i: int, draw: Any, ids: list[str]) -> dict[str, Any]:
    status = draw(st.sampled_from(STATUSES))
    changes: dict[str, Any] = {"status": status, "lesson": f"lesson {i}"}
    if status in ("failed", "regressed", "worked-with-caveat", "inconclusive"):
        changes |= {"failure_reason": "why", "failure_reason_confidence": "inferred"}
    if draw(st.booleans()):
        changes["objective"] = draw(st.sampled_from(OBJECTIVES))
    else:
        changes["objective"] = None
    changes["methods"] = draw(st.one_of(st.none(), st.lists(st.sampled_from(METHODS), max_size=2, unique=True)))
    changes["data_rows"] = draw(st.one_of(st.none(), st.integers(0, 3)))
    # what the gate compares a proposal with: its family, question and tracking issue
    changes["family"] = draw(st.sampled_from(FAMILIES))
    changes["question"] = draw(st.one_of(st.none(), st.sampled_from(QUESTIONS)))
    changes["tracking_issue"] = draw(st.one_of(st.none(), st.sampled_from(["#1", "#2"])))
    if ids and draw(st.integers(0, 3)) > 0:
        changes |= {"varied_from": draw(st.sampled_from(ids)), "varied": f"step {i}"}
    if draw(st.booleans()):  # an imported record, with its place in the ledger
        changes["origin"] = {
            "file": "attempts.json",
            "schema_version": 2,
            "imported_at": draw(st.sampled_from(["2026-01-01T00:00:00Z", "2026-02-01T00:00:00Z"])),
            "position": draw(st.integers(0, 20)),
            "keys": [],
            "lacks": [],
        }
    if draw(st.booleans()):  # pre-registration, which the dossier shows
        changes |= {
            "hypothesis": "it helps",
            "evaluator": "tinygpt@0123456789ab",
            "budget": {"wall_clock_seconds": draw(st.sampled_from([60, 90.5, 600.0])), "max_repeats": 3},
        }
    record = complete_record(f"r{i}", **changes)
    if draw(st.booleans()):  # as ptreg writes it: the dossier is then read off the JSON (records/dumped.py)
        record = Attempt.model_validate(record).to_json_dict()
    return record


@st.composite
def scenarios(draw: Any) -> tuple[list[dict[str, Any]], list[tuple[str, int, Any]]]:
    records: list[dict[str, Any]] = []
    for i in range(draw(st.integers(1, 12))):
        records.append(_record(i, draw, [r["id"] for r in records]))
    edits = []
    for step in range(draw(st.integers(1, 6))):
        kind = draw(st.sampled_from(["edit", "delete", "add", "corrupt", "touch", "same-size"]))
        target = draw(st.integers(0, 100))
        edits.append((kind, target, _record(100 + step, draw, [r["id"] for r in records])))
    return records, edits


def apply_edit(root: Path, kind: str, target: int, new: dict[str, Any]) -> None:
    files = sorted(p for p in root.glob("*.json") if p.name != "registry.json")
    if kind == "add" or not files:
        (root / f"{new['id']}.json").write_text(json.dumps(new, indent=2), encoding="utf-8")
        return
    path = files[target % len(files)]
    if kind == "delete":
        path.unlink()
    elif kind == "corrupt":
        path.write_bytes(path.read_bytes()[:-7])
    elif kind == "touch":
        os.utime(path)
    elif kind == "same-size":
        before = os.stat(path)
        data = path.read_bytes()
        swapped = data.replace(b'"lesson ', b'"LESSON ', 1)
        with open(path, "r+b") as handle:
            handle.write(swapped)
        os.utime(path, ns=(before.st_atime_ns, before.st_mtime_ns))
    else:
        new = dict(new, id=path.stem)
        path.write_text(json.dumps(new, indent=2), encoding="utf-8")


def edits_answer_as_a_full_read(
    tmp_path: Path,
    scenario: Any,
    empty: Path,
    around: Callable[[Path], AbstractContextManager[Any]] = nullcontext,
) -> None:
    """Write the scenario's registry (into a copy of ``empty``) and, within ``around(root)``,
    check the index against a full read before its edits and after each one."""
    records, edits = scenario
    root = tmp_path / f"reg-{os.urandom(4).hex()}"
    shutil.copytree(empty, root, symlinks=True)
    for record in records:  # raw, as write_registry writes them
        (root / f"{record['id']}.json").write_text(json.dumps(record, indent=2), encoding="utf-8")
    try:
        with around(root):
            assert_agrees(root)
            for kind, target, new in edits:
                apply_edit(root, kind, target, new)
                assert_agrees(root)
    finally:
        shutil.rmtree(root)


@settings(max_examples=80, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(scenario=scenarios())
def test_random_registries_and_edits_the_index_answers_as_a_full_read(
    tmp_path: Path, empty_registry: Path, scenario
) -> None:
    edits_answer_as_a_full_read(tmp_path, scenario, empty_registry)


def test_every_query_command_prints_the_same_with_and_without_the_index(
    cli, registry: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Through the command line, on a registry with a broken file, a misnamed one and two files
    giving one id: the index answers as the full read (`PTREG_INDEX=off`), word for word."""
    (registry / "broken.json").write_text("{", encoding="utf-8")
    (registry / "misnamed.json").write_text(json.dumps(complete_record("c1", lesson="misnamed")), encoding="utf-8")
    (registry / "zz-also-c4.json").write_text(json.dumps(complete_record("c4", lesson="twice")), encoding="utf-8")
    commands = [
        ["list"],
        ["list", "--json"],
        ["list", "--failures-only", "--json"],
        ["list", "--method", "vectorization", "--objective", "peak-memory"],
        ["list", "--failures-only"],
        ["list", "--method", "vectorization", "--method", "cache-blocking", "--status", "failed"],
        ["list", "--base", "matmul-f32"],
        ["streaks"],
        ["streaks", "--json"],
        ["coverage", "--json"],
        ["precedents", "--objective", "peak-memory", "--method", "vectorization", "--json"],
        ["lineage", "c2", "--json"],
        ["lineage", "c1"],
        ["show", "c2", "--json"],
        ["show", "nope"],
        ["lineage", "broken"],
        ["disposition", "check", "--json"],
    ]
    answers: dict[str, list[tuple[int, str, str]]] = {}
    for mode in ("index", "off"):
        if mode == "off":
            monkeypatch.setenv("PTREG_INDEX", "off")
        answers[mode] = []
        for args in commands:
            result = cli("-r", registry, *args)
            answers[mode].append((result.code, result.out, result.err))
    assert answers["index"] == answers["off"]
    assert any(code == 0 for code, _, _ in answers["index"]) and any(code != 0 for code, _, _ in answers["index"])


def heavy_modules(registry: Path, *commands: list[str]) -> str:
    """Which of pydantic and NumPy a fresh process loads to run ``commands`` on ``registry``
    (each must exit 0), as a sorted list's text."""
    import subprocess
    import sys

    code = (
        "import sys, json\nfrom ptreg.cli import main\n"
        "for args in json.loads(sys.argv[2]):\n"
        "    try:\n        main(['-r', sys.argv[1], *args])\n    except SystemExit as exc:\n"
        "        assert not exc.code, exc.code\n"
        "print(sorted(m for m in ('pydantic', 'numpy') if m in sys.modules), file=sys.stderr)"
    )
    argv = [sys.executable, "-c", code, str(registry), json.dumps(commands)]
    done = subprocess.run(argv, capture_output=True, text=True, check=True)
    return done.stderr.strip().splitlines()[-1]


def test_queries_of_an_unchanged_registry_build_no_model(registry: Path) -> None:
    """The index answers `list`, `streaks`, `lineage`, `coverage` and `precedents` without
    pydantic (docs/architecture.md); a changed file brings the models in to read it."""

    def modules() -> str:
        return heavy_modules(
            registry, ["list"], ["streaks"], ["lineage", "c2"], ["coverage"], ["precedents", "--family", "x"]
        )

    assert modules() == "['pydantic']"  # the first command builds the index, reading every record
    assert modules() == "[]"
    _rewrite(registry / "c1.json", {"lesson": "changed"})
    assert modules() == "['pydantic']"


def as_ptreg_writes(root: Path) -> None:
    """Every record file of ``root`` rewritten as ptreg writes it (``Attempt.to_json_dict``)."""
    for path in root.glob("*.json"):
        if path.name != "registry.json":
            raw = json.loads(path.read_text(encoding="utf-8"))
            path.write_text(json.dumps(Attempt.model_validate(raw).to_json_dict(), indent=2), encoding="utf-8")


def test_show_reads_the_files_the_index_vouches_for_without_the_models(cli, registry: Path) -> None:
    """`show` of a lineage whose files hold what ptreg writes builds no model, and prints what
    the models give; a hand edit in another key order sends it through the models again."""
    as_ptreg_writes(registry)

    def modules() -> str:
        return heavy_modules(registry, ["show", "c2"])

    def dossier() -> str:
        return cli("-r", registry, "show", "c2", "--json").out

    modules()  # builds the index
    assert modules() == "[]"
    shown = dossier()
    c1 = registry / "c1.json"  # an ancestor of c2
    c1.write_text(json.dumps(dict(reversed(json.loads(c1.read_text()).items()))), encoding="utf-8")
    assert modules() == "['pydantic']"
    assert dossier() == shown
    with closing(open_index(registry)) as index:
        assert index.vouched(["c1", "c2"]).keys() == {"c2"}


def test_a_file_changed_after_the_check_is_read_through_the_models(registry: Path) -> None:
    """Bytes other than those the index validated are never read as vouched for."""
    from ptreg.store.lineage_read import read_lineage

    as_ptreg_writes(registry)
    index = open_index(registry)
    try:
        assert not read_lineage(index, "c2").through_models
        path = registry / "c2.json"
        changed = dict(json.loads(path.read_text()), lesson="changed behind the index")
        path.write_text(json.dumps(Attempt.model_validate(changed).to_json_dict()), encoding="utf-8")
        lineage = read_lineage(index, "c2")
        assert lineage.through_models and lineage.attempt.lesson == "changed behind the index"
    finally:
        index.close()


def test_a_symlinked_or_runs_holding_record_is_read_through_the_models(registry: Path) -> None:
    from ptreg.store.lineage_read import read_lineage

    as_ptreg_writes(registry)
    (registry / "c4.json").rename(registry / "elsewhere.txt")
    (registry / "c4.json").symlink_to("elsewhere.txt")
    with closing(open_index(registry)) as index:
        assert sorted(index.vouched(["c1", "c2", "c3", "c4"])) == ["c1", "c2", "c3"]
        assert read_lineage(index, "c1").through_models  # c4 descends from it
        assert not read_lineage(index, "c3").through_models
    path = registry / "c3.json"
    runs = [{"run_id": "20261201T000000Z", "status": "failed"}]
    path.write_text(json.dumps(Attempt.model_validate(dict(json.loads(path.read_text()), runs=runs)).to_json_dict()))
    with closing(open_index(registry)) as index:
        assert "c3" in index.vouched(["c3"])
        assert read_lineage(index, "c3").through_models  # the runs' section reads the run models


def _remembered(root: Path, value: Any) -> Any:
    index = open_index(root)
    try:
        return index.remembered("answer", lambda: value)
    finally:
        index.close()


def test_a_kept_result_is_dropped_by_any_change_of_the_files(registry: Path) -> None:
    assert _remembered(registry, [1, "a"]) == [1, "a"]
    assert _remembered(registry, "recomputed") == [1, "a"]  # kept: nothing changed
    _rewrite(registry / "c1.json", {"lesson": "changed"})
    assert _remembered(registry, "after the edit") == "after the edit"
    assert _remembered(registry, "again") == "after the edit"
    (registry / "c2.json").unlink()
    assert _remembered(registry, "after the deletion") == "after the deletion"


def test_a_damaged_kept_result_is_computed_again(registry: Path) -> None:
    assert _remembered(registry, "first") == "first"
    db = sqlite3.connect(index_path(registry), isolation_level=None)
    db.execute("UPDATE derived SET value = '{not json'")
    db.close()
    assert _remembered(registry, "again") == "again"
    assert _remembered(registry, "not again") == "again"


def test_a_kept_result_is_not_read_by_other_code(registry: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    assert _remembered(registry, "old code") == "old code"
    monkeypatch.setattr(connection, "code_stamp", lambda: "another build of ptreg")
    assert _remembered(registry, "new code") == "new code"


def test_a_kept_result_waits_for_no_other_writer(registry: Path) -> None:
    """Another process holding the index for writing: the result is computed and given, not kept."""
    index = open_index(registry)
    other = sqlite3.connect(index_path(registry), isolation_level=None)
    try:
        other.execute("BEGIN IMMEDIATE")
        assert index.remembered("answer", lambda: "computed") == "computed"
        assert index.summaries()  # the index still answers
    finally:
        other.execute("ROLLBACK")
        other.close()
        index.close()
    assert _remembered(registry, "kept now") == "kept now"
    assert _remembered(registry, "not again") == "kept now"


def test_the_gate_reads_as_a_full_read_when_two_files_give_one_id(registry: Path) -> None:
    """The narrowed gate reading (the family's unasked count, the streak's kept tips) takes an id
    given by two files as the full read does: as the last of them in the ledger's order."""
    twins = [
        complete_record("c2", family="memory", question=QUESTIONS[2], objective="peak-memory", varied_from="c3"),
        failed_record("c4", family="memory", objective="peak-memory", varied_from="c1", varied="again"),
        failed_record("harness-fix", family="runtime-perf", objective="training-step-time"),
    ]
    for record in twins:
        (registry / f"zz-{record['id']}.json").write_text(json.dumps(record), encoding="utf-8")
    # one that asks a question, so that its freshness check counts those of its family that ask none
    asking = complete_record("asking", question=QUESTIONS[0], objective="peak-memory")
    (registry / "asking.json").write_text(json.dumps(asking), encoding="utf-8")
    assert_agrees(registry)


class _Later:
    """time as the index reads it, 10 s ahead: every file then looks settled, not racy."""

    @staticmethod
    def time_ns() -> int:
        import time

        return time.time_ns() + 10 * 10**9


def test_the_kept_listing_names_exactly_the_files_whose_stamp_moved(
    registry: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Past the racy window, a check after a change looks only at the files the listing the
    last check kept does not vouch for: an edit in place, then a new file, a deleted one and
    another edit."""
    monkeypatch.setattr(freshness, "time", _Later)
    open_index(registry).close()

    def every_file(*args: Any) -> None:
        raise AssertionError("every file's stamp was compared with its row")

    def refreshed() -> tuple[list[str], list[str]]:
        with monkeypatch.context() as patch:
            patch.setattr(freshness, "scan", every_file)
            index = open_index(registry)
        index.close()
        return index.refresh.reread, index.refresh.removed

    _rewrite(registry / "c2.json", {"lesson": "changed in place"})
    assert refreshed() == (["c2.json"], [])
    _rewrite(registry / "c1.json", {"lesson": "changed in place"})
    (registry / "c3.json").unlink()
    (registry / "c9.json").write_text(json.dumps(complete_record("c9")), encoding="utf-8")
    assert refreshed() == (["c1.json", "c9.json"], ["c3.json"])
    assert refreshed() == ([], [])
    assert_agrees(registry)


def test_reading_the_header_keeps_the_sqlite_locks_this_process_holds(tmp_path: Path) -> None:
    """SQLite's locks are POSIX record locks, dropped when any descriptor of the file in the
    process is closed: the header's reads must not drop the lock of a transaction in flight
    (another process would then write beside it, or roll its journal back as a hot one)."""
    root = write_registry(tmp_path / "reg", [complete_record("plain")])
    open_index(root).close()
    path = index_module.index_path(root)
    db = sqlite3.connect(path, isolation_level=None)
    try:
        db.execute("BEGIN IMMEDIATE")  # this process now holds the write lock
        file.change_counter(root)
        file.header_problem(root)
        other = subprocess.run(
            [
                sys.executable,
                "-c",
                "import sqlite3, sys; sqlite3.connect(sys.argv[1], timeout=0, isolation_level=None)"
                ".execute('BEGIN IMMEDIATE')",
                str(path),
            ],
            capture_output=True,
            text=True,
        )
        assert other.returncode != 0 and "locked" in other.stderr, "the lock was dropped by the header's read"
    finally:
        db.execute("ROLLBACK")
        db.close()


def test_term_files_added_changed_and_removed_behind_its_back_are_followed(tmp_path: Path) -> None:
    """As a checkout or a merge leaves them: the index's vocabularies follow the term files,
    whether they changed within the racy window of the last check or long after it."""
    from ptreg.store.directory import load_meta
    from ptreg.store.index import open_index

    root = write_registry(tmp_path / "reg", [complete_record("a")])
    folder = root / "vocabulary" / "method"

    def methods() -> dict[str, str | None]:
        index = open_index(root)
        try:
            found = dict(index.vocabularies().method_vocabulary)
        finally:
            index.close()
        assert found == load_meta(root).method_vocabulary
        return found

    methods()
    (folder / "fusion.json").write_text('{"term": "fusion", "description": "Fuse.", "order": 40}', encoding="utf-8")
    assert methods()["fusion"] == "Fuse."
    past = 1_000_000_000  # stamps moved well before the last check: not racy
    os.utime(folder / "fusion.json", ns=(past, past))
    (folder / "fusion.json").write_text('{"term": "fusion", "description": "Fused.", "order": 40}', encoding="utf-8")
    assert methods()["fusion"] == "Fused."
    (folder / "fusion.json").unlink()
    assert "fusion" not in methods()
    assert_agrees(root)
