"""A run's in-progress folder and journal (store/rounds_journal.py), the rule that counts a
continued run once (records/continuation.py), and what validate and repair make of both."""

from __future__ import annotations

import json
import os
from pathlib import Path
from types import SimpleNamespace

import pytest

from helpers import registry_with_a_run
from ptreg.errors import PtregError, UnusableInput
from ptreg.records.continuation import continued, continued_twice, counted_once
from ptreg.records.run_journal import JournalHead, JournalRound
from ptreg.records.run_results import MetricSample
from ptreg.store.progress import in_progress_folder, make_in_progress_folder
from ptreg.store.rounds_journal import Journal, read_journal, remove_folder

HEAD = JournalHead(
    journal=1,
    run_id="20260101T000000Z",
    attempt="measured",
    evaluator="e@0123456789ab",
    order_seed=3,
    pid=1,
    process_started=0.0,
    started_at="2026-01-01T00:00:00Z",
    code=None,
)


def a_round(arm: str, r: int) -> JournalRound:
    return JournalRound(
        config="all", arm=arm, round=r, samples=[MetricSample(repeat=r, seed=r, values={"score": float(r)})]
    )


def run(run_id: str, continues: str | None = None) -> SimpleNamespace:
    return SimpleNamespace(run_id=run_id, continues=continues)


def test_a_continued_run_is_counted_once() -> None:
    runs = [run("a"), run("b", continues="a"), run("c", continues="b"), run("d")]
    assert continued(runs) == {"a", "b"}
    assert [r.run_id for r in counted_once(runs)] == ["c", "d"]
    # a run whose continuation is not among them still counts
    assert [r.run_id for r in counted_once(runs[:1])] == ["a"]
    assert continued_twice([*runs, run("e", continues="a")]) == {"a": ["b", "e"]}


def test_the_journal_is_read_back_as_written(tmp_path: Path) -> None:
    folder = make_in_progress_folder(tmp_path, "measured", HEAD.run_id)
    assert folder == in_progress_folder(tmp_path, "measured", HEAD.run_id)
    assert (os.stat(folder).st_mode & 0o777) == 0o700
    journal = Journal(folder, HEAD)
    journal.append(a_round("one", 0))
    journal.append(a_round("two", 0))
    journal.close()
    read = read_journal(folder)
    assert read.head == HEAD and read.rounds == [a_round("one", 0), a_round("two", 0)] and read.note is None
    remove_folder(tmp_path, "measured", HEAD.run_id)
    assert not folder.exists()


@pytest.mark.parametrize("torn", [b'{"config": "all", "arm"', b'{"config": "all"}\n', b"\xff\xfe\n"])
def test_a_torn_last_line_is_left_out_with_a_note(tmp_path: Path, torn: bytes) -> None:
    folder = make_in_progress_folder(tmp_path, "measured", HEAD.run_id)
    journal = Journal(folder, HEAD)
    journal.append(a_round("one", 0))
    journal.close()
    with open(folder / "samples.jsonl", "ab") as handle:
        handle.write(torn)
    read = read_journal(folder)
    assert read.rounds == [a_round("one", 0)]
    assert read.note is not None and "line 3" in read.note


def test_a_bad_line_before_the_last_refuses_the_journal(tmp_path: Path) -> None:
    folder = make_in_progress_folder(tmp_path, "measured", HEAD.run_id)
    lines = [HEAD.model_dump_json(), '{"config": "all", "arm": "one", "round": -1, "samples": []}']
    (folder / "samples.jsonl").write_text("\n".join([*lines, a_round("one", 0).model_dump_json()]) + "\n")
    with pytest.raises(UnusableInput, match=r"samples\.jsonl line 2"):
        read_journal(folder)


def test_a_symlink_is_never_taken_for_the_folder_or_the_journal(tmp_path: Path) -> None:
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    runs = tmp_path / "reg" / "runs" / "measured"
    runs.mkdir(parents=True)
    (runs / f".running-{HEAD.run_id}").symlink_to(elsewhere)
    with pytest.raises(PtregError, match="symlink"):
        make_in_progress_folder(tmp_path / "reg", "measured", HEAD.run_id)
    remove_folder(tmp_path / "reg", "measured", HEAD.run_id)  # leaves the link, and what it leads to, alone
    assert (runs / f".running-{HEAD.run_id}").is_symlink() and elsewhere.exists()
    (runs / f".running-{HEAD.run_id}").unlink()
    folder = make_in_progress_folder(tmp_path / "reg", "measured", HEAD.run_id)
    (folder / "samples.jsonl").symlink_to(elsewhere / "journal")
    (elsewhere / "journal").write_text(HEAD.model_dump_json() + "\n")
    with pytest.raises(PtregError, match="symlink"):
        read_journal(folder)


def test_validate_names_a_lost_run_and_repair_leaves_it(tmp_path: Path) -> None:
    from ptreg.operations.repair import repair
    from ptreg.operations.validate import validate_path

    root = registry_with_a_run(tmp_path / "reg")
    lost = make_in_progress_folder(root, "measured", "20260102T000000Z")
    journal = Journal(lost, HEAD.model_copy(update={"run_id": "20260102T000000Z"}))
    journal.append(a_round("one", 0))
    journal.close()
    empty = make_in_progress_folder(root, "measured", "20260103T000000Z")  # killed as it began: nothing measured
    _, problems = validate_path(root)
    said = [p for p in problems if p.file in (str(lost), str(empty))]
    assert [p.severity for p in said] == ["warning", "warning"]
    assert "ptreg run measured --resume" in said[0].message and "repair" not in said[0].message
    assert "measured no round" in said[1].message and "`ptreg repair` removes it" in said[1].message
    report = repair(root)
    assert [x.path for x in report.removed] == [empty] and [x.path for x in report.left] == [lost]
    assert lost.exists() and not empty.exists()


def test_validate_reports_two_runs_continuing_one(tmp_path: Path) -> None:
    from ptreg.operations.validate import validate_path

    root = registry_with_a_run(tmp_path / "reg")
    record = json.loads((root / "measured.json").read_text())
    first = record["runs"][0]
    record["runs"] += [
        {**first, "run_id": "20300101T000000Z", "continues": first["run_id"]},
        {**first, "run_id": "20300101T000001Z", "continues": first["run_id"]},
        {**first, "run_id": "20300101T000002Z", "continues": "20290101T000000Z"},
    ]
    (root / "measured.json").write_text(json.dumps(record, indent=2))
    _, problems = validate_path(root)
    twice = [p for p in problems if p.rule == "continued-twice"]
    assert len(twice) == 1 and "20300101T000000Z and 20300101T000001Z" in twice[0].message
    assert twice[0].severity == "error"
    assert [p.rule for p in problems if "20290101T000000Z" in p.message] == ["continues"]


def test_every_reader_that_counts_runs_counts_a_continued_one_once(tmp_path: Path) -> None:
    """The plan's deciding runs and history read the one rule: a run continued by another
    is left out (a continuation carries its rounds; pooled with it, they would count twice)."""
    from ptreg.records.attempt import RunRef
    from ptreg.views.comparison import FoundRun, each_once
    from ptreg.views.plans import complete_runs

    refs = [
        RunRef(run_id="20300101T000000Z", status="complete"),
        RunRef(run_id="20300101T000001Z", status="complete", continues="20300101T000000Z"),
        RunRef(run_id="20300101T000002Z", status="complete"),
    ]
    attempt = SimpleNamespace(runs=refs)
    assert [r.run_id for r in complete_runs(attempt)] == ["20300101T000001Z", "20300101T000002Z"]

    def found(attempt_id: str, ref: RunRef) -> FoundRun:
        results = SimpleNamespace(attempt=attempt_id, run_id=ref.run_id, continues=ref.continues)
        return FoundRun(results, None, tmp_path / attempt_id / ref.run_id)

    runs = [found("a", r) for r in refs] + [found("b", refs[0])]  # another attempt's run of that id stays
    assert [(r.results.attempt, r.results.run_id) for r in each_once(runs)] == [
        ("a", "20300101T000001Z"),
        ("a", "20300101T000002Z"),
        ("b", "20300101T000000Z"),
    ]


def test_validate_holds_a_link_to_what_its_run_continues(tmp_path: Path) -> None:
    """Counting reads the link's ``continues``: one the run's results do not say is an error."""
    from ptreg.operations.validate import validate_path

    root = registry_with_a_run(tmp_path / "reg")
    record = json.loads((root / "measured.json").read_text())
    record["runs"][0]["continues"] = "20200101T000000Z"
    (root / "measured.json").write_text(json.dumps(record, indent=2))
    _, problems = validate_path(root)
    said = [p.message for p in problems if p.rule == "run"]
    assert any("continues no run in its results, but the record says 20200101T000000Z" in m for m in said), said
