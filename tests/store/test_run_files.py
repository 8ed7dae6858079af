"""A run folder's files are each held to one bound, the one a bundle holds them to: per-item
results are kept apart from results.json, split over as many files as keep each under it, and
put back when the run is read; a file of them changed or forged is refused in one line."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import pytest

from helpers import assert_one_line_error, complete_record, snapshot, write_registry
from ptreg.engine.workloads.command import CommandWorkload
from ptreg.errors import PtregError
from ptreg.records.evaluator import ArmsSpec, parse_spec
from ptreg.records.run_results import (
    RESULTS_VERSION,
    Cell,
    Measurement,
    MetricSample,
    Provenance,
    Roles,
    RunResults,
    new_results,
)
from ptreg.store import bundle, runs

SPEC = parse_spec(
    {
        "name": "big-eval",
        "workload": "command",
        "command": ["python3", "eval.py", "{model}"],
        "arms": {"baseline": {"model": "a"}, "candidate": {"model": "b"}},
        "baseline": "baseline",
        "metrics": {"score": {"better": "higher", "unit": "fraction"}},
        "repeats": 3,
        "seed": 0,
        "timeout_seconds": 60,
    },
    "spec",
)
RUN_ID = "20261201T000000Z"


def read_back(folder: Path, root: Path) -> RunResults:
    """The run as read, less the names of its files of items (which the run in memory has not)."""
    found = runs.read_results(folder, root)
    assert found.kept_apart
    return found.model_copy(update={"kept_apart": None})


def arms_run(items: int, attempt: str = "big") -> RunResults:
    """A run of two arms over three repeats, each repeat scoring ``items`` items."""
    assert isinstance(SPEC, ArmsSpec)
    workload = CommandWorkload()
    cells = []
    for n, arm in enumerate(SPEC.arms):
        samples = []
        for repeat in range(SPEC.repeats):
            scores = {f"question-{i:06d}": float((i * (repeat + 2) + n) % 3 == 0) for i in range(items)}
            samples.append(
                MetricSample(
                    repeat=repeat,
                    seed=repeat,
                    values={"score": sum(scores.values()) / items},
                    items={"score": scores},
                    wall_seconds=1.0 + repeat,
                    peak_memory_mb=20.0,
                )
            )
        cell = Cell(backend=arm, config="all", status="measured")
        workload.summarize(SPEC, cell, samples)
        cells.append(cell)
    workload.compare(SPEC, cells, Roles(reference=None, peer=None))
    stamp = "2026-12-01T00:00:00Z"
    return new_results(
        SPEC,
        Measurement([], cells, Roles(reference=None, peer=None), [], "complete", None),
        Provenance(["ptreg", "run", attempt], stamp, stamp, 2, attempt=attempt, run_id=RUN_ID),
    )


def test_items_are_split_over_files_under_the_bound_and_read_back_whole(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(runs, "RUN_FILE_MAX_BYTES", 20_000)
    results = arms_run(600)
    folder = runs.write_run(tmp_path, results, {})
    names = sorted(p.name for p in folder.iterdir())
    items = [n for n in names if n.startswith("items-")]
    assert len(items) > 3 and names == sorted(["results.json", "environment.json", *items])
    for path in folder.iterdir():
        assert path.stat().st_size <= 20_000, path.name
    stored = json.loads((folder / "results.json").read_text())
    assert stored["results_version"] == RESULTS_VERSION == 9
    assert all("items" not in s for c in stored["cells"] for s in c["metric_samples"])
    assert set(stored["kept_apart"]) == set(items)
    assert read_back(folder, tmp_path) == results  # every item of every repeat back in its place


def test_a_repeat_with_more_items_than_a_file_holds_goes_over_several_lines(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(runs, "RUN_FILE_MAX_BYTES", 16_000)  # one repeat's 1,500 items take about 35 kB
    results = arms_run(1_500)
    folder = runs.write_run(tmp_path, results, {})
    lines = [json.loads(line) for p in folder.glob("items-*.jsonl") for line in p.read_text().splitlines()]
    assert len(lines) > 2 * 3 * 2  # each repeat of each arm over more than one line
    assert max(p.stat().st_size for p in folder.iterdir()) <= 16_000
    assert read_back(folder, tmp_path) == results


def test_samples_go_apart_too_when_results_json_would_pass_the_bound(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    results = arms_run(20)
    inline = len(runs.run_texts(results, {})["results.json"].encode())
    monkeypatch.setattr(runs, "RUN_FILE_MAX_BYTES", inline - 1)  # the same run, one byte too large together
    folder = runs.write_run(tmp_path, results, {})
    stored = json.loads((folder / "results.json").read_text())
    assert all("metric_samples" not in c for c in stored["cells"])
    assert {n.split("-")[0] for n in stored["kept_apart"]} == {"items", "samples"}
    assert all(p.stat().st_size < inline for p in folder.iterdir())
    assert read_back(folder, tmp_path) == results


def test_a_run_file_past_the_bound_is_refused_before_anything_is_written(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(runs, "RUN_FILE_MAX_BYTES", 3_000)  # results.json alone is larger
    with pytest.raises(PtregError, match=r"results.json would have \d+ bytes, more than the 3000"):
        runs.write_run(tmp_path, arms_run(10), {})
    assert not (tmp_path / "runs" / "big").exists() or not any((tmp_path / "runs" / "big").iterdir())


def test_the_bundle_holds_a_run_file_to_the_bound_runs_are_written_under() -> None:
    assert bundle._limit(f"runs/a/{RUN_ID}/results.json") == runs.RUN_FILE_MAX_BYTES
    assert bundle._limit(f"runs/a/{RUN_ID}/items-12.jsonl") == runs.RUN_FILE_MAX_BYTES
    assert bundle._limit(f"runs/a/{RUN_ID}/items-0.jsonl") is None
    assert bundle._limit(f"runs/a/{RUN_ID}/notes.jsonl") is None


def _registry_with(root: Path, results: RunResults) -> Path:
    write_registry(root, [complete_record("plain")])
    record = complete_record("big", status="not-tried", evidence=None, lesson=None, next_action=None)
    record["runs"] = [{"run_id": RUN_ID, "status": results.status}]
    (root / "big.json").write_text(json.dumps(record, indent=2))
    runs.write_run(root, results, {})
    return root


def test_a_large_evaluation_ptreg_runs_is_one_its_own_bundle_carries(cli, tmp_path: Path) -> None:
    """80,000 items of 2 arms over 3 repeats wrote a results.json of 87 MB, which `export
    --bundle` refused (16 MB a run file): now each file is under the bound, and the run travels."""
    results = arms_run(80_000)
    source = _registry_with(tmp_path / "source", results)
    folder = runs.run_folder(source, "big", RUN_ID)
    for path in folder.iterdir():
        assert path.stat().st_size <= runs.RUN_FILE_MAX_BYTES, path.name
    exported = cli("export", "--bundle", tmp_path / "big.tar.gz", "--registry", source)
    assert exported.code == 0, exported.err
    target = tmp_path / "target"
    write_registry(target, [complete_record("other")])
    imported = cli("import", tmp_path / "big.tar.gz", "--registry", target)
    assert imported.code == 0, imported.err
    assert read_back(runs.run_folder(target, "big", RUN_ID), target) == results


def _forge(folder: Path, name: str, text: str | bytes) -> None:
    """Replace a file of per-item results, and its digest in results.json, as an editor could."""
    data = text if isinstance(text, bytes) else text.encode()
    (folder / name).write_bytes(data)
    raw = json.loads((folder / "results.json").read_text())
    raw["kept_apart"][name] = hashlib.sha256(data).hexdigest()
    (folder / "results.json").write_text(json.dumps(raw))


@pytest.mark.parametrize(
    ("forge", "problem"),
    [
        (lambda folder: (folder / "items-1.jsonl").write_text("{}\n"), "items-1.jsonl: its sha256 is"),
        (lambda folder: (folder / "items-1.jsonl").unlink(), "items-1.jsonl: no such file"),
        (lambda folder: _forge(folder, "items-1.jsonl", "not json\n"), "items-1.jsonl: line 1 is not JSON"),
        (
            lambda folder: _forge(
                folder, "items-1.jsonl", '{"arm": "other", "repeat": 0, "metric": "score", "items": {}}\n'
            ),
            "names arm 'other' repeat 0, which results.json lacks",
        ),
        (
            lambda folder: _forge(
                folder, "items-1.jsonl", '{"arm": "baseline", "repeat": 0, "metric": "score", "items": {"a": NaN}}\n'
            ),
            "'score' of item 'a' is not a finite number",
        ),
        (
            lambda folder: _forge(
                folder,
                "items-1.jsonl",
                '{"arm": "baseline", "repeat": 0, "metric": "score", "items": {"a": 1}}\n'
                '{"arm": "baseline", "repeat": 0, "metric": "score", "items": {"a": 0}}\n',
            ),
            "item 'a' of 'score' is there a second time",
        ),
        (
            lambda folder: (folder / "items-1.jsonl").write_bytes(b"\xff\xfe"),
            "items-1.jsonl: its sha256 is",
        ),
        (lambda folder: _forge(folder, "items-1.jsonl", b"\xff\xfe\n"), r"items-1.jsonl: not UTF-8 \(byte 0\)"),
        (lambda folder: _forge(folder, "items-1.jsonl", "[" * 100_000 + "\n"), "line 1 is not JSON"),
        (
            lambda folder: _forge(folder, "samples-1.jsonl", '{"cell": 7, "field": "metric_samples", "samples": []}\n'),
            "samples-1.jsonl: line 1: cell 7 is none of the 2 of results.json",
        ),
        (
            lambda folder: _forge(folder, "samples-1.jsonl", '{"cell": 0, "field": "metric_samples", "samples": []}\n'),
            "results.json holds cell 0's metric_samples itself",
        ),
    ],
)
def test_a_changed_or_forged_file_of_items_is_one_line(cli, tmp_path: Path, forge, problem: str) -> None:
    root = _registry_with(tmp_path / "reg", arms_run(5))
    folder = runs.run_folder(root, "big", RUN_ID)
    forge(folder)
    with pytest.raises(PtregError, match=problem) as caught:
        runs.read_results(folder, root)
    assert "\n" not in caught.value.message
    validated = cli("validate", root)
    assert validated.code == 1 and ".jsonl" in validated.out and "Traceback" not in validated.err


@pytest.mark.parametrize("name", ["../../big.json", "/etc/passwd", "items-1.json", "results.json"])
def test_results_naming_another_file_as_items_is_refused_unread(tmp_path: Path, name: str) -> None:
    root = _registry_with(tmp_path / "reg", arms_run(5))
    folder = runs.run_folder(root, "big", RUN_ID)
    raw = json.loads((folder / "results.json").read_text())
    raw["kept_apart"] = {name: "0" * 64}
    (folder / "results.json").write_text(json.dumps(raw))
    with pytest.raises(PtregError, match="is not the name of a file a run keeps apart"):
        runs.read_results(folder, root)


def test_an_items_file_that_is_a_symlink_is_not_followed(tmp_path: Path) -> None:
    root = _registry_with(tmp_path / "reg", arms_run(5))
    folder = runs.run_folder(root, "big", RUN_ID)
    outside = tmp_path / "elsewhere.jsonl"
    outside.write_bytes((folder / "items-1.jsonl").read_bytes())
    (folder / "items-1.jsonl").unlink()
    (folder / "items-1.jsonl").symlink_to(outside)
    with pytest.raises(PtregError, match="outside the registry"):
        runs.read_results(folder, root)


def test_a_bundle_with_an_items_file_its_run_does_not_name_is_refused_whole(cli, tmp_path: Path) -> None:
    source = _registry_with(tmp_path / "source", arms_run(5))
    bundle_dir = tmp_path / "bundle"
    assert cli("export", "--bundle", bundle_dir, "--registry", source).code == 0
    (bundle_dir / "runs" / "big" / RUN_ID / "items-9.jsonl").write_text("{}\n")
    target = tmp_path / "target"
    write_registry(target, [complete_record("other")])
    before = snapshot(target)
    refused = cli("import", bundle_dir, "--registry", target)
    assert_one_line_error(refused, 2, "items-9.jsonl", "a file its results.json does not name")
    assert snapshot(target) == before
