"""The command line: every command with its exit code, and every bad input as one line on
stderr ('ptreg: error: ...'), the right exit code, no traceback, and the registry unchanged."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from helpers import (
    SCHEMAS,
    assert_one_line_error,
    complete_record,
    sample_records,
    snapshot,
    write_attempts_file,
    write_registry,
)

# --------------------------------------------------------------------------- init


def test_init_with_registry_option(cli, tmp_path: Path) -> None:
    root = tmp_path / "reg"
    result = cli("--registry", root, "init")
    assert result.code == 0 and (root / "registry.json").is_file()
    assert str(root / "registry.json") in result.out


def test_init_with_directory_argument(cli, tmp_path: Path) -> None:
    result = cli("init", tmp_path / "given")
    assert result.code == 0 and (tmp_path / "given" / "registry.json").is_file()


def test_init_uses_environment_then_default(cli, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PTREG_REGISTRY", str(tmp_path / "env-reg"))
    assert cli("init").code == 0
    assert (tmp_path / "env-reg" / "registry.json").is_file()
    monkeypatch.delenv("PTREG_REGISTRY")
    assert cli("init").code == 0  # the working directory is tmp_path (see conftest)
    assert (tmp_path / "attempts" / "registry.json").is_file()


def test_option_wins_over_environment_on_the_command_line(
    cli, sample_registry: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("PTREG_REGISTRY", str(tmp_path / "does-not-exist"))
    result = cli("--registry", sample_registry, "list", "--json")
    assert result.code == 0 and len(result.json()) == len(sample_records())


def test_second_init_refused(cli, sample_registry: Path) -> None:
    before = snapshot(sample_registry)
    assert_one_line_error(cli("--registry", sample_registry, "init"), 1, "already")
    assert snapshot(sample_registry) == before


# --------------------------------------------------------------------------- validate


def test_validate_valid_directory(cli, sample_registry: Path) -> None:
    result = cli("--registry", sample_registry, "validate")
    assert result.code == 0, result.out
    assert "5 attempts, 0 errors" in result.out and "valid" in result.out
    assert cli("validate", sample_registry).code == 0


def test_validate_valid_file(cli, sample_file: Path) -> None:
    result = cli("validate", sample_file, "--json")
    assert result.code == 0
    data = result.json()
    assert data["valid"] is True and data["errors"] == 0 and data["attempts"] == 5 and data["problems"] == []


def test_validate_invalid_directory_text_and_json(cli, tmp_path: Path) -> None:
    root = write_registry(
        tmp_path / "reg",
        [complete_record("ok"), complete_record("bad", kind="nope", evidence_sources=[])],
    )
    before = snapshot(root)
    text = cli("validate", root)
    assert text.code == 1
    assert "[vocabulary] bad:" in text.out and "#/kind" in text.out and "invalid" in text.out
    result = cli("validate", root, "--json")
    assert result.code == 1
    data = result.json()
    assert data["valid"] is False and data["errors"] == 2
    assert {(p["rule"], p["attempt_id"], p["pointer"]) for p in data["problems"]} == {
        ("vocabulary", "bad", "/kind"),
        ("evidence-sources", "bad", "/evidence_sources"),
    }
    assert snapshot(root) == before


def test_validate_invalid_file_points_into_it(cli, tmp_path: Path) -> None:
    path = write_attempts_file(tmp_path / "a.json", [complete_record("ok"), complete_record("ok")])
    data = cli("validate", path, "--json").json()
    assert [(p["rule"], p["pointer"], p["file"]) for p in data["problems"]] == [
        ("unique-id", "/attempts/1/id", str(path))
    ]


def test_validate_check_sources(cli, tmp_path: Path) -> None:
    sources = tmp_path / "project"
    (sources / "docs").mkdir(parents=True)
    (sources / "docs" / "bench.md").write_text("x")
    root = write_registry(tmp_path / "reg", [complete_record("ok"), complete_record("gone", source="docs/none.md")])
    assert cli("validate", root).code == 0
    result = cli("validate", root, "--sources-base", sources, "--json")
    assert result.code == 1
    assert [(p["rule"], p["attempt_id"], p["pointer"]) for p in result.json()["problems"]] == [
        ("source-exists", "gone", "/source")
    ]
    assert_one_line_error(cli("validate", root, "--sources-base", tmp_path / "nowhere"), 2, "--sources-base")
    (root / "docs" / "bench.md").parent.mkdir()
    (root / "docs" / "bench.md").write_text("x")
    relative = cli("validate", root, "--check-sources", "--json")  # from the registry directory by default
    assert [p["attempt_id"] for p in relative.json()["problems"]] == ["gone"]


def test_validate_registry_with_unreadable_record_is_invalid_not_unusable(cli, tmp_path: Path) -> None:
    root = write_registry(tmp_path / "reg", [complete_record("ok")], files={"broken.json": '{"id": '})
    result = cli("validate", root)
    assert result.code == 1
    assert "broken.json" in result.out and "line 1 column" in result.out


# --------------------------------------------------------------------------- list, lineage, streaks, coverage


def test_list_text_and_json(cli, sample_registry: Path) -> None:
    text = cli("--registry", sample_registry, "list")
    assert text.code == 0
    for record in sample_records():
        assert record["id"] in text.out
    assert text.out.strip().endswith("5 of 5 attempts")
    data = cli("--registry", sample_registry, "list", "--json", "--failures-only").json()
    assert sorted(a["id"] for a in data) == ["cache-blocked", "naive-baseline"]
    assert data[0] == next(r for r in sample_records() if r["id"] == data[0]["id"])


def test_list_nothing_found(cli, sample_registry: Path) -> None:
    result = cli("--registry", sample_registry, "list", "--family", "nope")
    assert result.code == 0 and result.out.strip() == "0 of 5 attempts"


def test_lineage_text_and_json(cli, sample_registry: Path) -> None:
    text = cli("--registry", sample_registry, "lineage", "cache-blocked")
    assert text.code == 0
    assert "naive-baseline" in text.out and "tile loops 64x64" in text.out and "register-blocked" in text.out
    data = cli("--registry", sample_registry, "lineage", "register-blocked", "--json").json()
    assert [s["id"] for s in data["chain"]] == ["naive-baseline", "cache-blocked", "register-blocked"]
    assert data["superseded_by"] == []


def test_streaks_and_coverage_run(cli, sample_registry: Path) -> None:
    streaks = cli("--registry", sample_registry, "streaks", "--json")
    assert streaks.code == 0
    by_objective = {s["objective"]: s for s in streaks.json()}
    assert by_objective["training-step-time"]["level"] == "ok"
    assert by_objective["training-step-time"]["chain"] == ["naive-baseline", "cache-blocked", "register-blocked"]
    assert cli("--registry", sample_registry, "streaks").code == 0
    coverage = cli("--registry", sample_registry, "coverage", "--json")
    assert coverage.code == 0 and coverage.json()["non_infrastructure_attempts"] == 4
    text = cli("--registry", sample_registry, "coverage")
    assert text.code == 0 and "varied_from" in text.out


# --------------------------------------------------------------------------- show


@pytest.mark.parametrize("fmt", ["text", "markdown", "json"])
def test_show_formats(cli, sample_registry: Path, fmt: str) -> None:
    result = cli("--registry", sample_registry, "show", "naive-baseline", "--format", fmt)
    assert result.code == 0, result.err
    assert "Measure end to end." in result.out
    if fmt == "json":
        assert result.json()["attempt"]["id"] == "naive-baseline"


# --------------------------------------------------------------------------- import, export, schema


def test_import_and_export(cli, sample_file: Path, tmp_path: Path) -> None:
    root = tmp_path / "reg"
    result = cli("--registry", root, "import", sample_file)
    assert result.code == 0, result.err
    assert "imported 5 attempts" in result.out
    out = tmp_path / "out.json"
    exported = cli("--registry", root, "export", "-o", out)
    assert exported.code == 0 and "wrote 5 attempts" in exported.err
    assert json.loads(out.read_text()) == json.loads(cli("--registry", root, "export").out)
    original = json.loads(sample_file.read_text())
    again = json.loads(out.read_text())
    assert {a["id"]: a for a in again["attempts"]} == {a["id"]: a for a in original["attempts"]}


def test_import_json_report(cli, tmp_path: Path) -> None:
    v1 = write_attempts_file(
        tmp_path / "v1.json", [{"id": "legacy", "name": "Legacy", "status": "worked", "source": "x.md"}], version=1
    )
    result = cli("--registry", tmp_path / "reg", "import", v1, "--json")
    assert result.code == 0
    data = result.json()
    assert data["schema_version"] == 1 and data["imported"] == 1 and data["created_registry"] is True
    assert data["unknown_fields"]["family"] == 1
    assert {p["rule"] for p in data["problems_after_import"]} == {"unknown-field"}
    text = cli("--registry", tmp_path / "reg2", "import", v1)
    assert "unknown (left unset, not invented): family in 1 of 1" in text.out


def test_import_clash_then_replace(cli, sample_registry: Path, sample_file: Path) -> None:
    before = snapshot(sample_registry)
    assert_one_line_error(cli("--registry", sample_registry, "import", sample_file), 1, "naive-baseline", "--replace")
    assert snapshot(sample_registry) == before
    result = cli("--registry", sample_registry, "import", sample_file, "--replace")
    assert result.code == 0 and "replaced:" in result.out


def test_import_schema_error_refused(cli, sample_registry: Path, tmp_path: Path) -> None:
    bad = write_attempts_file(tmp_path / "bad.json", [complete_record("typed", data_rows="12")])
    before = snapshot(sample_registry)
    result = cli("--registry", sample_registry, "import", bad)
    assert result.code == 1 and "Traceback" not in result.err
    lines = result.err.strip().splitlines()
    assert lines[-1].startswith("ptreg: error: ") and "nothing imported" in lines[-1]
    assert any("/attempts/0/data_rows" in line for line in lines[:-1])
    assert snapshot(sample_registry) == before


def test_schema_check(cli, tmp_path: Path) -> None:
    assert cli("schema", "--check", "--out", SCHEMAS).code == 0
    empty = tmp_path / "empty"
    empty.mkdir()
    stale = cli("schema", "--check", "--out", empty)
    assert stale.code == 1 and "attempt.schema.json" in stale.err
    written = cli("schema", "--out", tmp_path / "fresh")
    assert written.code == 0
    assert cli("schema", "--check", "--out", tmp_path / "fresh").code == 0
    for path in SCHEMAS.iterdir():
        assert (tmp_path / "fresh" / path.name).read_bytes() == path.read_bytes()


def test_version(cli) -> None:
    result = cli("--version")
    assert result.code == 0 and result.out.startswith("ptreg ")


# --------------------------------------------------------------------------- bad input


def test_import_missing_file(cli, sample_registry: Path, tmp_path: Path) -> None:
    before = snapshot(sample_registry)
    assert_one_line_error(cli("--registry", sample_registry, "import", tmp_path / "missing.json"), 2, "missing.json")
    assert snapshot(sample_registry) == before


def test_import_invalid_json(cli, sample_registry: Path, tmp_path: Path) -> None:
    bad = tmp_path / "bad.json"
    bad.write_text('{"schema_version": 2,\n  "attempts": [\n    {"id": "x",}\n  ]\n}\n')
    before = snapshot(sample_registry)
    assert_one_line_error(cli("--registry", sample_registry, "import", bad), 2, "bad.json", "line 3 column")
    assert snapshot(sample_registry) == before


def test_import_into_a_fresh_directory_that_fails_creates_nothing(cli, tmp_path: Path) -> None:
    bad = tmp_path / "bad.json"
    bad.write_bytes(b'{"schema_version": 2, "attempts": ["\xff"]}')
    assert_one_line_error(cli("--registry", tmp_path / "new", "import", bad), 2, "UTF-8")
    assert not (tmp_path / "new").exists()


def test_import_newer_schema_version(cli, sample_registry: Path, tmp_path: Path) -> None:
    v3 = write_attempts_file(tmp_path / "v3.json", [complete_record("future")], version=3)
    before = snapshot(sample_registry)
    assert_one_line_error(cli("--registry", sample_registry, "import", v3), 2, "schema_version 3")
    assert snapshot(sample_registry) == before


def test_validate_missing_file(cli, tmp_path: Path) -> None:
    assert_one_line_error(cli("validate", tmp_path / "missing.json"), 2, "missing.json")


def test_validate_unreadable_json(cli, tmp_path: Path) -> None:
    bad = tmp_path / "bad.json"
    bad.write_text("{\n\n  oops\n}")
    assert_one_line_error(cli("validate", bad), 2, "bad.json", "line 3 column 3")


def test_validate_file_with_duplicate_keys(cli, tmp_path: Path) -> None:
    bad = tmp_path / "dup.json"
    bad.write_text('{"schema_version": 2, "schema_version": 2, "attempts": []}')
    assert_one_line_error(cli("validate", bad), 2, "duplicate key")


def test_registry_json_newer_version(cli, sample_registry: Path) -> None:
    meta = json.loads((sample_registry / "registry.json").read_text())
    meta["schema_version"] = 4
    (sample_registry / "registry.json").write_text(json.dumps(meta))
    before = snapshot(sample_registry)
    assert_one_line_error(cli("--registry", sample_registry, "validate"), 2, "schema_version 4")
    assert_one_line_error(cli("--registry", sample_registry, "list"), 2, "schema_version 4")
    assert snapshot(sample_registry) == before


@pytest.mark.parametrize("command", ["show", "lineage"])
def test_unknown_id_suggests_the_closest(cli, sample_registry: Path, command: str) -> None:
    before = snapshot(sample_registry)
    result = cli("--registry", sample_registry, command, "cache-blockd")
    assert_one_line_error(result, 2, "cache-blockd", "did you mean", "cache-blocked")
    assert snapshot(sample_registry) == before


def test_unknown_id_on_the_shared_registry(cli, shared_registry: Path) -> None:
    result = cli("--registry", shared_registry, "show", "wasm-backward-da-blockin")
    assert_one_line_error(result, 2, "wasm-backward-da-blocking")


@pytest.mark.parametrize("bad_id", ["../x", "../registry", "a/b", "/etc/passwd", "Bad Id", "registry", "a..b"])
@pytest.mark.parametrize("command", ["show", "lineage"])
def test_id_that_could_escape_the_registry(
    cli, sample_registry: Path, tmp_path: Path, bad_id: str, command: str
) -> None:
    (tmp_path / "x.json").write_text(json.dumps(complete_record("x")))  # a target outside, to be sure
    before = snapshot(sample_registry)
    assert_one_line_error(cli("--registry", sample_registry, command, bad_id), 2, "invalid attempt id")
    assert snapshot(sample_registry) == before


def test_id_with_a_trailing_newline_is_bad_syntax(cli, sample_registry: Path) -> None:
    """'cache-blocked\\n' is no valid id (the record schema refuses it): bad id syntax, exit 2,
    not an unknown id."""
    assert_one_line_error(cli("--registry", sample_registry, "show", "cache-blocked\n"), 2, "invalid attempt id")


def test_unknown_status(cli, sample_registry: Path) -> None:
    assert_one_line_error(cli("--registry", sample_registry, "list", "--status", "great"), 2, "great", "worked")


@pytest.mark.parametrize(
    "args",
    [["list"], ["show", "x"], ["lineage", "x"], ["streaks"], ["coverage"], ["validate"], ["export"]],
)
def test_missing_registry_directory(cli, tmp_path: Path, args: list[str]) -> None:
    missing = tmp_path / "no-registry"
    assert_one_line_error(cli("--registry", missing, *args), 2, "no-registry")
    assert not missing.exists()


def test_directory_without_registry_json(cli, tmp_path: Path) -> None:
    plain = tmp_path / "plain"
    plain.mkdir()
    (plain / "a.json").write_text("{}")
    assert_one_line_error(cli("--registry", plain, "list"), 2, "registry.json")
    assert sorted(p.name for p in plain.iterdir()) == ["a.json"]


def test_export_to_a_missing_directory(cli, sample_registry: Path, tmp_path: Path) -> None:
    assert_one_line_error(cli("--registry", sample_registry, "export", "-o", tmp_path / "no" / "out.json"), 2, "no")


def test_export_of_a_broken_registry(cli, tmp_path: Path) -> None:
    root = write_registry(tmp_path / "reg", [complete_record("ok")], files={"bad.json": "["})
    out = tmp_path / "out.json"
    assert_one_line_error(cli("--registry", root, "export", "-o", out), 1, "bad.json")
    assert not out.exists()


def test_show_of_a_broken_record(cli, tmp_path: Path) -> None:
    root = write_registry(tmp_path / "reg", [complete_record("ok"), complete_record("typed", data_rows="12")])
    result = cli("--registry", root, "show", "typed")
    assert result.code == 1
    assert "Traceback" not in result.err
    assert result.err.strip().splitlines()[-1].startswith("ptreg: error: ")
    assert "validate" in result.err


@pytest.mark.parametrize(
    "args",
    [["show"], ["show", "x", "--format", "pdf"], ["no-such-command"], ["list", "--bogus"], ["lineage"]],
)
def test_usage_errors_exit_2_without_traceback(cli, sample_registry: Path, args: list[str]) -> None:
    before = snapshot(sample_registry)
    result = cli("--registry", sample_registry, *args)
    assert result.code == 2
    assert "Traceback" not in result.err + result.out
    assert snapshot(sample_registry) == before


# --------------------------------------------------------------------------- the real console script


def console_script() -> str:
    beside = Path(sys.executable).parent / "ptreg"
    found = str(beside) if beside.exists() else shutil.which("ptreg")
    if not found:
        pytest.skip("the ptreg console script is not installed beside this Python")
    return found


def run_script(*args: object, cwd: Path) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if k != "PTREG_REGISTRY"}
    return subprocess.run(
        [console_script(), *map(str, args)], cwd=cwd, env=env, capture_output=True, text=True, timeout=60
    )


def assert_clean_failure(proc: subprocess.CompletedProcess[str], code: int, fragment: str) -> None:
    assert proc.returncode == code, (proc.returncode, proc.stderr)
    assert "Traceback" not in proc.stderr + proc.stdout
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("ptreg: error: ") and fragment in lines[0], proc.stderr


def test_script_invalid_json(sample_registry: Path, tmp_path: Path) -> None:
    bad = tmp_path / "bad.json"
    bad.write_text('{\n  "schema_version": 2,\n  "attempts": [}\n')
    before = snapshot(sample_registry)
    assert_clean_failure(run_script("--registry", sample_registry, "import", bad, cwd=tmp_path), 2, "line 3 column")
    assert snapshot(sample_registry) == before


def test_script_id_escaping_the_registry(sample_registry: Path, tmp_path: Path) -> None:
    assert_clean_failure(
        run_script("--registry", sample_registry, "show", "../x", cwd=tmp_path), 2, "invalid attempt id"
    )


def test_script_unknown_id(sample_registry: Path, tmp_path: Path) -> None:
    assert_clean_failure(
        run_script("--registry", sample_registry, "lineage", "cache-blockd", cwd=tmp_path), 2, "cache-blocked"
    )


def test_script_missing_registry(tmp_path: Path) -> None:
    assert_clean_failure(run_script("list", cwd=tmp_path), 2, "attempts")
    assert not (tmp_path / "attempts").exists()


# --------------------------------------------------------------------------- validate one record file


def test_validate_one_record_file_checks_it_in_its_registry(cli, tmp_path: Path) -> None:
    root = write_registry(
        tmp_path / "reg",
        [complete_record("parent"), complete_record("child", varied_from="parent", varied="tile 64 -> 128")],
    )
    ok = cli("validate", root / "child.json", "--json")
    assert ok.code == 0, ok.out
    assert ok.json()["attempts"] == 1  # only that record is reported on, its parent still resolves

    broken = complete_record("orphan", varied_from="missing-parent", varied="x")
    (root / "orphan.json").write_text(json.dumps(broken))
    bad = cli("validate", root / "orphan.json", "--json")
    assert bad.code == 1
    assert {p["attempt_id"] for p in bad.json()["problems"]} == {"orphan"}
    # the whole registry is invalid because of orphan, but child alone is still fine
    assert cli("validate", root / "child.json").code == 0


def test_validate_a_non_attempt_file_inside_a_registry_is_unusable(cli, tmp_path: Path) -> None:
    root = write_registry(tmp_path / "reg", [complete_record("one")])
    (root / "notes.txt").write_text("hello")
    assert_one_line_error(cli("validate", root / "notes.txt"), 2, "notes.txt")


def test_validate_counts_every_record_file_even_unreadable_ones(cli, tmp_path: Path) -> None:
    root = write_registry(tmp_path / "reg", [complete_record("fine")])
    (root / "broken.json").write_text('{"id": "broken",')
    result = cli("validate", root, "--json")
    assert result.code == 1
    report = result.json()
    assert report["attempts"] == 2
    assert [p["file"] for p in report["problems"]] == [str(root / "broken.json")]
    shown = cli("--registry", root, "show", "broken")
    assert_one_line_error(shown, 2, "broken.json", "line 1")


@pytest.mark.parametrize(
    "args, fragment",
    [
        (["show"], "Missing argument"),
        (["list", "--bogus"], "--bogus"),
        (["show", "x", "--format", "pdf"], "pdf"),
        (["no-such-command"], "no-such-command"),
    ],
)
def test_usage_errors_are_one_line(cli, sample_registry: Path, args: list[str], fragment: str) -> None:
    assert_one_line_error(cli("--registry", sample_registry, *args), 2, fragment, "--help")


def test_no_arguments_prints_the_help_and_nothing_failed(cli) -> None:
    result = cli()
    assert result.code == 0
    assert "validate" in result.out and "ptreg: error" not in result.err


UNKNOWN_ID_COMMANDS = [
    ["show"],
    ["lineage"],
    ["gate"],
    ["run"],
    ["disposition", "check"],
    ["conclude", "--status", "worked", "--lesson", "x", "--next-action", "y"],
    ["history"],
]


@pytest.mark.parametrize("command", UNKNOWN_ID_COMMANDS, ids=lambda c: c[0] if c[0] != "disposition" else "check")
def test_an_unknown_id_is_unusable_input_everywhere_with_the_closest(cli, sample_registry: Path, command) -> None:
    """One exit code for an id that names no attempt (2, unusable input), and the closest ids."""
    known = sorted(p.stem for p in sample_registry.glob("*.json") if p.name != "registry.json")[0]
    typo = known[:-1]
    args = [command[0], *command[1:], typo] if command[0] != "disposition" else ["disposition", "check", typo]
    if command[0] == "conclude":
        args = ["conclude", typo, *command[1:]]
    assert_one_line_error(cli("-r", sample_registry, *args), 2, f"no attempt {typo!r}", f"did you mean: {known}")


def test_compare_names_an_unknown_attempt_as_every_command_does(cli, sample_registry: Path) -> None:
    known = sorted(p.stem for p in sample_registry.glob("*.json") if p.name != "registry.json")[0]
    result = cli("-r", sample_registry, "compare", known[:-1], known)
    assert_one_line_error(result, 2, f"no attempt {known[:-1]!r}", "did you mean")
