"""`ptreg repair` and the warnings of `ptreg validate` for what a killed write leaves behind:
an orphaned run folder, staged files, a run's staging folder, an import's journal."""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

import pytest

from helpers import complete_record, freeze_evaluator, propose_for_run, snapshot, tiny_spec, write_registry

TINY = tiny_spec("crash-tiny")

RUN_ID = "20261201T000000Z"


@pytest.fixture(scope="module")
def ran(tmp_path_factory) -> dict:
    """A registry before and after one real run (its record bytes at both moments)."""
    from ptreg.operations.running import run_attempt

    root = write_registry(tmp_path_factory.mktemp("ran") / "reg", [complete_record("seed-record")])
    ref = freeze_evaluator(root, **TINY)
    propose_for_run(root, ref, "linked-late", "#91")
    unlinked = (root / "linked-late.json").read_bytes()
    done = run_attempt(root, "linked-late", ["test"])
    return {
        "root": root,
        "unlinked": unlinked,
        "linked": (root / "linked-late.json").read_bytes(),
        "run": done.folder.name,
    }


@pytest.fixture
def orphaned(ran: dict, tmp_path: Path) -> Path:
    """The registry as a kill between the run folder and the link leaves it."""
    root = tmp_path / "reg"
    shutil.copytree(ran["root"], root)
    (root / "linked-late.json").write_bytes(ran["unlinked"])
    return root


def test_validate_warns_about_an_orphaned_run_and_repair_links_it(orphaned: Path, ran: dict, cli) -> None:
    result = cli("-r", orphaned, "validate")
    assert result.code == 0, result.out
    assert "warning [orphaned-run] linked-late: a complete run that linked-late does not link" in result.out
    before = snapshot(orphaned)
    dry = cli("-r", orphaned, "repair", "--dry-run")
    assert dry.code == 0 and f"would link run {ran['run']} to linked-late" in dry.out
    assert snapshot(orphaned) == before
    done = cli("-r", orphaned, "repair", "--json")
    assert done.code == 0
    assert [x["run_id"] for x in json.loads(done.out)["linked"]] == [ran["run"]]
    # exactly what the run itself would have written
    assert (orphaned / "linked-late.json").read_bytes() == ran["linked"]
    again = cli("-r", orphaned, "validate")
    assert again.code == 0 and "0 warnings: valid" in again.out
    assert "nothing to repair" in cli("-r", orphaned, "repair").out


def test_an_orphan_of_no_valid_attempt_is_left_for_a_person(orphaned: Path, ran: dict, cli) -> None:
    shutil.copytree(orphaned / "runs" / "linked-late", orphaned / "runs" / "ghost")
    result = cli("-r", orphaned, "repair")
    assert result.code == 1
    assert f"left alone: {orphaned / 'runs' / 'ghost' / ran['run']}: run folder of 'ghost'" in result.out
    assert (orphaned / "runs" / "ghost").exists()


def test_an_orphan_of_an_attempt_concluded_since_is_kept_apart_and_reported(orphaned: Path, ran: dict, cli) -> None:
    """Measured, then the attempt concluded before the run was linked: a concluded record gains
    no run, so neither `repair` nor the next conclusion links it; both say which run, which
    attempt and why, and the record keeps every byte."""
    record = json.loads(ran["unlinked"])
    record.update(
        status="inconclusive",
        lesson="Concluded before its run was linked.",
        next_action="Measure again under a new attempt.",
        failure_reason="The run was not linked when the verdict was given.",
        failure_reason_confidence="inferred",
        evidence="None linked when concluded.",
        evidence_sources=["linked-late.json"],
        source="linked-late.json",
        # what its plan decides with no run linked: nothing to decide on
        plan_decision={"status": "inconclusive", "because": "nothing to decide on", "runs": [], "readout": []},
    )
    (orphaned / "linked-late.json").write_text(json.dumps(record, indent=2) + "\n")
    folder = orphaned / "runs" / "linked-late" / ran["run"]
    why = f"run {ran['run']} of linked-late is kept apart, unlinked: linked-late was concluded (status inconclusive)"
    checked = cli("-r", orphaned, "validate")
    assert checked.code == 0 and f"{folder}: warning [orphaned-run] linked-late: {why}" in checked.out
    before = {k: v for k, v in snapshot(orphaned).items() if "index" not in k}
    for args in (("repair",), ("repair", "--dry-run")):
        result = cli("-r", orphaned, *args)
        lines = result.out.strip().splitlines()
        assert result.code == 1 and len(lines) == 1 and lines[0].startswith(f"left alone: {folder}: {why}"), lines
        assert "a concluded record gains no run" in lines[0]
    assert {k: v for k, v in snapshot(orphaned).items() if "index" not in k} == before


def test_a_concluded_attempt_is_refused_a_run_in_the_one_place_runs_are_linked(orphaned: Path, ran: dict) -> None:
    from ptreg.errors import CheckFailed
    from ptreg.operations.running import link_runs, unlinked_runs
    from ptreg.store.directory import read_attempt
    from ptreg.store.runs import read_results

    shutil.copyfile(orphaned / "linked-late.json", orphaned.parent / "not-tried.json")
    (orphaned / "linked-late.json").write_text(
        json.dumps(complete_record("linked-late", status="worked"), indent=2) + "\n"
    )
    assert unlinked_runs(orphaned, read_attempt(orphaned, "linked-late")) == []
    results = read_results(orphaned / "runs" / "linked-late" / ran["run"])
    with pytest.raises(
        CheckFailed, match=r"linked-late is concluded \(status worked\), and a concluded record gains no run"
    ):
        link_runs(orphaned, "linked-late", [results])
    shutil.copyfile(orphaned.parent / "not-tried.json", orphaned / "linked-late.json")
    assert [r.run_id for r in unlinked_runs(orphaned, read_attempt(orphaned, "linked-late"))] == [ran["run"]]


def test_staged_leftovers_are_warnings_and_repair_removes_them(orphaned: Path, cli) -> None:
    (orphaned / "linked-late.json").write_bytes((orphaned / "linked-late.json").read_bytes())
    leftovers = [
        orphaned / ".seed-record.json.abc123.tmp",
        orphaned / "evaluators" / ".x.json.q1w2e3.tmp",
        orphaned / "runs" / "linked-late" / f".tmp-{RUN_ID}-4242",
    ]
    leftovers[0].write_text('{"id": "seed-rec')
    leftovers[1].write_text("")
    leftovers[2].mkdir()
    (leftovers[2] / "results.json").write_text("{")
    result = cli("-r", orphaned, "validate")
    assert result.code == 0
    for path in leftovers:
        assert f"{path}: warning [leftover]" in result.out
    assert cli("-r", orphaned, "repair").code == 0
    assert not any(p.exists() for p in leftovers)


def test_the_folder_a_run_stages_under_its_run_lock_is_no_leftover(orphaned: Path, cli) -> None:
    """A run that found the registry busy at its end writes its folder under its run lock alone:
    while that lock is held, its staging folder is neither reported nor removed."""
    from ptreg.store.locks import run_lock

    staging = orphaned / "runs" / "linked-late" / f".tmp-{RUN_ID}-4242"
    staging.mkdir()
    (staging / "results.json").write_text("{")
    with run_lock(orphaned, "linked-late"):
        assert "[leftover]" not in cli("-r", orphaned, "validate").out
        assert cli("-r", orphaned, "repair").code == 0
        assert (staging / "results.json").exists()
    assert f"{staging}: warning [leftover]" in cli("-r", orphaned, "validate").out
    assert cli("-r", orphaned, "repair").code == 0
    assert not staging.exists()
    # under a folder no attempt id could name, no run lock is asked about: still a leftover
    stray = orphaned / "runs" / "Not An Id" / f".tmp-{RUN_ID}-4242"
    stray.mkdir(parents=True)
    checked = cli("-r", orphaned, "validate")
    assert checked.code == 0 and f"{stray}: warning [leftover]" in checked.out, checked.out + checked.err


def test_a_journal_left_by_a_killed_import_is_finished_before_anything_is_read(tmp_path: Path, cli) -> None:
    from ptreg.store.journal import JOURNAL_FILE

    root = write_registry(tmp_path / "reg", [complete_record("kept")])
    staged = ".import.k1ll3d.tmp"
    (root / staged).write_text(json.dumps(complete_record("landed"), indent=2) + "\n")
    (root / JOURNAL_FILE).write_text(
        json.dumps({"journal_version": 1, "operation": "import", "pid": 1, "renames": [[staged, "landed.json"]]})
    )
    result = cli("-r", root, "list", "--json")
    assert result.code == 0
    assert sorted(a["id"] for a in json.loads(result.out)) == ["kept", "landed"]
    assert "finished an import that was cut short (1 files)" in result.err
    assert not (root / JOURNAL_FILE).exists() and not (root / staged).exists()


def test_a_killed_bundle_import_finishes_into_folders_it_had_not_made_yet(tmp_path: Path, cli) -> None:
    from ptreg.store.journal import JOURNAL_FILE

    root = write_registry(tmp_path / "reg", [complete_record("kept")])
    staged, target = ".import.b0und1e.tmp", "runs/kept/20240101T000000Z/environment.json"
    (root / staged).write_text("{}\n")
    (root / JOURNAL_FILE).write_text(
        json.dumps({"journal_version": 1, "operation": "import", "pid": 1, "renames": [[staged, target]]})
    )
    assert cli("-r", root, "list").code == 0
    assert (root / target).read_text() == "{}\n"
    assert not (root / JOURNAL_FILE).exists() and not (root / staged).exists()


@pytest.mark.parametrize(
    "journal",
    [
        "{not json",
        json.dumps({"journal_version": 1, "renames": [[".a.tmp", "../outside.json"]]}),
        json.dumps({"journal_version": 1, "renames": [[".a.tmp", "runs/../../outside.json"]]}),
        json.dumps({"journal_version": 99, "renames": []}),
    ],
    ids=["invalid-json", "escapes-the-registry", "escapes-through-a-folder", "other-version"],
)
def test_a_journal_ptreg_did_not_write_is_refused_in_one_line(tmp_path: Path, cli, journal: str) -> None:
    from helpers import assert_one_line_error
    from ptreg.store.journal import JOURNAL_FILE

    root = write_registry(tmp_path / "reg", [complete_record("kept")])
    (root / JOURNAL_FILE).write_text(journal)
    before = snapshot(root)
    result = cli("-r", root, "list")
    assert_one_line_error(result, 2, str(root / JOURNAL_FILE))
    assert snapshot(root) == before
    assert not os.path.exists(tmp_path / "outside.json")


def test_a_run_is_never_written_through_a_symlink_out_of_the_registry(tmp_path: Path, cli) -> None:
    from helpers import assert_one_line_error

    root = write_registry(tmp_path / "reg", [complete_record("seed-record")])
    ref = freeze_evaluator(root, **TINY)
    propose_for_run(root, ref, "escape", "#92")
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    (root / "runs").mkdir()
    (root / "runs" / "escape").symlink_to(elsewhere)
    result = cli("-r", root, "run", "escape")
    assert_one_line_error(result, 2, "outside the registry")
    assert not list(elsewhere.iterdir())


def test_repair_rewrites_sources_written_relative_to_the_repository(tmp_path: Path, cli) -> None:
    import subprocess

    project = tmp_path / "project"
    (project / "docs").mkdir(parents=True)
    (project / "docs" / "bench.md").write_text("measured\n")
    subprocess.run(["git", "init", "-q", str(project)], check=True)
    root = write_registry(
        project / "attempts",
        [
            complete_record(
                "old-style",
                evidence_sources=["docs/bench.md#table", "https://example.invalid/x"],
                source="attempts/old-style.json",
            ),
            complete_record("lost", evidence_sources=["docs/gone.md"], source="docs/bench.md"),
        ],
    )
    assert cli("-r", root, "validate", "--check-sources").code == 1
    before = snapshot(root)
    dry = cli("-r", root, "repair", "--dry-run", "--json")
    assert dry.code == 0 and snapshot(root) == before
    moved = {(m["attempt"], m["old"], m["new"]) for m in json.loads(dry.out)["sources"]}
    assert moved == {
        ("old-style", "docs/bench.md#table", "../docs/bench.md#table"),
        ("old-style", "attempts/old-style.json", "old-style.json"),
        ("lost", "docs/bench.md", "../docs/bench.md"),
    }
    assert cli("-r", root, "repair").code == 0
    record = json.loads((root / "old-style.json").read_text())
    assert record["evidence_sources"] == ["../docs/bench.md#table", "https://example.invalid/x"]
    result = cli("-r", root, "validate", "--check-sources", "--json")
    assert [(p["attempt_id"], p["pointer"]) for p in json.loads(result.out)["problems"]] == [
        ("lost", "/evidence_sources/0")
    ]  # found neither way: left for a person
    assert json.loads(cli("-r", root, "repair", "--json").out)["sources"] == []


# --------------------------------------------------------------------------- the older layout


def _old_copy(tmp_path: Path) -> Path:
    """This project's own registry, turned back into the layout before term files."""
    from helpers import REPO, to_old_layout

    root = tmp_path / "old"
    shutil.copytree(REPO / "attempts", root)
    return to_old_layout(root)


def test_repair_migrates_the_older_layout_once_and_keeps_every_term_in_its_order(cli, tmp_path: Path) -> None:
    from ptreg.store.directory import load_meta

    root = _old_copy(tmp_path)
    before = load_meta(root)
    exported = tmp_path / "before.json"
    assert cli("-r", root, "export", "-o", exported).code == 0
    refused = cli("-r", root, "vocab", "add", "method", "fusion", "--description", "Fuse.")
    assert refused.code == 2 and "run `ptreg repair` to migrate it" in refused.err
    assert "vocabulary" not in os.listdir(root)
    first = cli("-r", root, "repair", "--json")
    assert first.code == 0 and first.json()["migrated"] is True
    assert json.loads((root / "registry.json").read_text()) == {"schema_version": 3, "vocabularies": "vocabulary"}
    assert load_meta(root) == before  # every term, its definition and its place
    migrated = snapshot(root)
    again = cli("-r", root, "repair", "--json")
    assert again.code == 0 and again.json()["migrated"] is False
    assert snapshot(root) == migrated
    after = tmp_path / "after.json"
    assert cli("-r", root, "export", "-o", after).code == 0
    assert after.read_bytes() == exported.read_bytes()  # the single-file ledger, byte for byte
    assert cli("-r", root, "vocab", "add", "method", "fusion", "--description", "Fuse.").code == 0
    assert list(load_meta(root).method_vocabulary)[-1] == "fusion"


def test_a_migration_cut_short_before_its_commit_point_is_made_again(cli, tmp_path: Path) -> None:
    """A term folder left by a killed migration (registry.json still of the older layout) is
    never read as the vocabularies, and the next repair builds it again from registry.json."""
    from ptreg.store.directory import load_meta

    root = _old_copy(tmp_path)
    before = load_meta(root)
    (root / "vocabulary" / "method").mkdir(parents=True)
    (root / "vocabulary" / "method" / "stray.json").write_text('{"term": "stray"}', encoding="utf-8")
    (root / ".tmp-vocabulary").mkdir()
    assert load_meta(root) == before
    assert cli("-r", root, "repair").code == 0
    assert load_meta(root) == before and not (root / ".tmp-vocabulary").exists()
    assert not (root / "vocabulary" / "method" / "stray.json").exists()


def test_a_term_file_staged_by_a_killed_vocab_add_is_removed(cli, tmp_path: Path) -> None:
    root = write_registry(tmp_path / "reg", [complete_record("a")])
    staged = root / "vocabulary" / "method" / ".fusion.json.x1y2z3.tmp"
    staged.write_text('{"term": "fusion"', encoding="utf-8")
    assert ".fusion.json.x1y2z3.tmp: warning" in cli("-r", root, "validate").out
    assert cli("-r", root, "repair").code == 0
    assert not staged.exists() and cli("-r", root, "validate").code == 0
