"""Frozen evaluators: `ptreg evaluator freeze|list|show|verify`, their identity, tamper
detection, the validate rules `evaluator-integrity` and `evaluator`, and the generated schema.

Expected hashes are computed here from plain JSON with hashlib, independently of ptreg."""

from __future__ import annotations

import hashlib
import json
import random
import shutil
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from jsonschema import Draft202012Validator

from helpers import SCHEMAS, assert_one_line_error, complete_record, snapshot, write_registry
from helpers import evaluator_spec as spec_dict
from ptreg.engine.plan import EVALUATOR_VERSION
from ptreg.records.evaluator import identity, parse_spec

# --------------------------------------------------------------------------- material


def expected_sha(spec: Any, version: int = EVALUATOR_VERSION) -> str:
    body = {"evaluator_version": version, "spec": spec}
    text = json.dumps(body, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def write_spec(path: Path, content: Any) -> Path:
    """``content`` as JSON, or a str written verbatim."""
    path.write_text(content if isinstance(content, str) else json.dumps(content), encoding="utf-8")
    return path


def frozen_files(root: Path) -> list[Path]:
    directory = root / "evaluators"
    return sorted(directory.iterdir()) if directory.exists() else []


@pytest.fixture(scope="module")
def _empty_master(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return write_registry(tmp_path_factory.mktemp("evaluator") / "reg", [])


@pytest.fixture
def empty_registry(_empty_master: Path) -> Callable[[Path], Path]:
    """An empty registry at a path, copied from one built once: writing it file by file, each
    write synced to disk, cost more than most of the tests that use it."""
    return lambda root: shutil.copytree(_empty_master, root, symlinks=True)


@pytest.fixture
def registry(empty_registry: Callable[[Path], Path], tmp_path: Path) -> Path:
    return empty_registry(tmp_path / "reg")


@pytest.fixture
def freeze(cli, registry: Path, empty_registry: Callable[[Path], Path], tmp_path: Path) -> Callable[..., Path]:
    """Freeze a spec (a dict, or raw text) through the CLI; return the frozen file's path."""
    counter = iter(range(1_000))

    def run(content: Any = None, *, elsewhere: bool = False) -> Path:
        """``elsewhere``: into a registry of its own, as another clone would (a name is one identity
        in a registry, so a changed spec under the same name is frozen there)."""
        n = next(counter)
        spec_path = write_spec(tmp_path / f"spec-{n}.json", spec_dict() if content is None else content)
        into = empty_registry(tmp_path / f"clone-{n}") if elsewhere else registry
        result = cli("-r", into, "evaluator", "freeze", spec_path, "--json")
        assert result.code == 0, result.err
        return Path(result.json()["path"])

    return run


# --------------------------------------------------------------------------- freeze


def test_freeze_writes_name_at_hash12_holding_the_identity(cli, registry: Path, tmp_path: Path) -> None:
    spec = spec_dict()
    spec_path = write_spec(tmp_path / "spec.json", spec)
    result = cli("-r", registry, "evaluator", "freeze", spec_path)
    assert result.code == 0, result.err
    sha = expected_sha(spec)
    path = registry / "evaluators" / f"kernels-xl@{sha[:12]}.json"
    assert frozen_files(registry) == [path]
    assert json.loads(path.read_text(encoding="utf-8")) == {
        "name": "kernels-xl",
        "sha256": sha,
        "evaluator_version": EVALUATOR_VERSION,
        "spec": spec,
    }
    assert identity(spec, EVALUATOR_VERSION) == sha
    assert f"kernels-xl@{sha[:12]}" in result.out and "froze" in result.out
    assert result.err == ""


def test_freeze_json_reports_ref_sha_path_created(cli, registry: Path, tmp_path: Path) -> None:
    spec_path = write_spec(tmp_path / "spec.json", spec_dict())
    sha = expected_sha(spec_dict())
    data = cli("-r", registry, "evaluator", "freeze", spec_path, "--json").json()
    assert data == {
        "ref": f"kernels-xl@{sha[:12]}",
        "sha256": sha,
        "path": str(registry / "evaluators" / f"kernels-xl@{sha[:12]}.json"),
        "created": True,
        "warnings": [],
    }


def test_freezing_the_identical_spec_again_changes_nothing(cli, registry: Path, tmp_path: Path) -> None:
    spec_path = write_spec(tmp_path / "spec.json", spec_dict())
    assert cli("-r", registry, "evaluator", "freeze", spec_path).code == 0
    before = snapshot(registry)
    again = cli("-r", registry, "evaluator", "freeze", spec_path)
    assert again.code == 0 and "already frozen" in again.out
    as_json = cli("-r", registry, "evaluator", "freeze", spec_path, "--json")
    assert as_json.code == 0 and as_json.json()["created"] is False
    assert as_json.json()["sha256"] == expected_sha(spec_dict())
    assert snapshot(registry) == before


def test_a_changed_spec_under_a_frozen_name_is_refused_then_and_there(cli, freeze, registry: Path, tmp_path) -> None:
    """An edited spec frozen under its old name would be a second measure of one name, which
    `new` would admit and `validate` and `run` refuse later: refused at freezing, saying why
    and what to do; under a name of its own it is a new file, and the old one is untouched."""
    old = freeze(spec_dict())
    before = snapshot(registry)
    changed = spec_dict(repeats=7)
    refused = cli("-r", registry, "evaluator", "freeze", write_spec(tmp_path / "edited.json", changed))
    assert_one_line_error(refused, 2, "edited.json#/name: evaluator name 'kernels-xl' is frozen already as", old.stem)
    assert "nothing frozen" in refused.err
    assert '"name": "kernels-xl-2"' in refused.err and "ptreg readmit ID --evaluator NEW" in refused.err
    assert snapshot(registry) == before
    new = freeze({**changed, "name": "kernels-xl-2"})
    assert new.name == f"kernels-xl-2@{expected_sha({**changed, 'name': 'kernels-xl-2'})[:12]}.json"
    assert old.read_bytes() == before[str(old.relative_to(registry))]
    assert frozen_files(registry) == sorted([old, new])
    assert freeze(spec_dict()) == old  # the same spec again is no second identity: nothing changes


def test_evaluator_version_is_part_of_the_identity() -> None:
    spec = spec_dict()
    assert identity(spec, EVALUATOR_VERSION) != identity(spec, EVALUATOR_VERSION + 1)
    assert identity(spec, EVALUATOR_VERSION + 1) == expected_sha(spec, EVALUATOR_VERSION + 1)


def test_key_order_and_whitespace_do_not_change_the_identity(freeze, registry: Path) -> None:
    spec = spec_dict()
    first = freeze(json.dumps(spec))
    before = snapshot(registry)
    reordered = dict(reversed(list(spec.items())))
    reordered["tolerance"] = {"atol": 1e-6, "rtol": 1e-5}
    spaced = json.dumps(reordered, indent=7).replace(":", " :\n\t ")
    assert json.loads(spaced) == spec  # the same content, written differently
    assert freeze(spaced) == first
    assert snapshot(registry) == before


def test_float_spelling_does_not_change_the_identity(freeze, registry: Path) -> None:
    text = json.dumps(spec_dict())
    assert '"rtol": 1e-05' in text
    first = freeze(text)
    before = snapshot(registry)
    assert freeze(text.replace('"rtol": 1e-05', '"rtol": 0.00001')) == first
    assert freeze(text.replace('"rtol": 1e-05', '"rtol": 1.0E-5')) == first
    assert snapshot(registry) == before


def test_a_different_value_changes_the_identity(freeze) -> None:
    assert freeze(spec_dict()).name != freeze(spec_dict(tolerance={"rtol": 2e-5, "atol": 1e-6}), elsewhere=True).name


def test_the_timer_key_changes_the_identity_only_when_it_counts(freeze) -> None:
    """Without the key a spec hashes as its plain JSON, as before the key existed; "wall", the
    default, is not written; "instructions" is another evaluator, and its file says so."""
    plain = freeze(spec_dict())
    assert plain.name == f"kernels-xl@{expected_sha(spec_dict())[:12]}.json"
    assert freeze(spec_dict(timer="wall")) == plain
    counted = freeze(spec_dict(timer="instructions"), elsewhere=True)
    assert counted.name != plain.name
    assert json.loads(counted.read_text())["spec"]["timer"] == "instructions"
    assert "timer" not in json.loads(plain.read_text())["spec"]


def test_a_timer_other_than_wall_or_instructions_is_refused_in_one_line(cli, registry: Path, tmp_path: Path) -> None:
    spec_path = write_spec(tmp_path / "spec.json", spec_dict(timer="cycles"))
    before = snapshot(registry)
    result = cli("-r", registry, "evaluator", "freeze", spec_path)
    assert_one_line_error(result, 2, "spec.json#/timer: Input should be 'wall' or 'instructions'")
    assert snapshot(registry) == before


@settings(max_examples=60, derandomize=True, deadline=None)
@given(
    seed=st.integers(0, 2**32 - 1),
    repeats=st.integers(1, 1000),
    order=st.randoms(use_true_random=False),
    indent=st.one_of(st.none(), st.integers(0, 8)),
)
def test_identity_ignores_key_order_and_layout(seed: int, repeats: int, order: random.Random, indent: Any) -> None:
    spec = spec_dict(seed=seed, repeats=repeats)
    keys = list(spec)
    order.shuffle(keys)
    text = json.dumps({k: spec[k] for k in keys}, indent=indent)
    parsed = parse_spec(json.loads(text), "spec.json").model_dump(mode="json", exclude_none=True)
    assert identity(parsed, EVALUATOR_VERSION) == identity(spec, EVALUATOR_VERSION) == expected_sha(spec)


# --------------------------------------------------------------------------- freeze: bad input


BAD_SPECS = {
    "missing-field": spec_dict(seed=None),
    "wrong-type": spec_dict(repeats="5"),
    "bool-as-int": spec_dict(seed=True),
    "float-as-int": spec_dict(timed_steps=10.0),
    "unknown-field": spec_dict(gpu="a100"),
    "baseline-not-a-backend": spec_dict(baseline="torch"),
    "metric-not-of-workload": spec_dict(metric="ms-per-step"),
    "tinygpt-in-gflops": spec_dict(workload="tinygpt-train"),
    "unknown-config": spec_dict(configs=["huge"]),
    "no-configs": spec_dict(configs=[]),
    "config-twice": spec_dict(configs=["xl", "xl"]),
    "bad-name": spec_dict(name="Kernels XL"),
    "negative-tolerance": spec_dict(tolerance={"rtol": -1.0, "atol": 0.0}),
    "tolerance-extra": spec_dict(tolerance={"rtol": 0.0, "atol": 0.0, "ulp": 1}),
    "zero-spread": spec_dict(max_relative_spread=0.0),
    "nan-spread": json.dumps(spec_dict()).replace('"max_relative_spread": 0.2', '"max_relative_spread": NaN'),
    "not-json": '{"name": "kernels-xl", ',
    "json-list": "[]",
    "json-string": '"kernels-xl"',
    "duplicate-key": json.dumps(spec_dict())[:-1] + ', "seed": 1}',
    "empty-file": "",
}


@pytest.mark.parametrize("case", sorted(BAD_SPECS))
def test_bad_spec_is_one_line_error_and_nothing_is_written(cli, registry: Path, tmp_path: Path, case: str) -> None:
    spec_path = write_spec(tmp_path / f"bad-{case}.json", BAD_SPECS[case])
    before = snapshot(registry)
    assert_one_line_error(cli("-r", registry, "evaluator", "freeze", spec_path), 2, f"bad-{case}.json")
    assert_one_line_error(cli("-r", registry, "evaluator", "freeze", spec_path, "--json"), 2, f"bad-{case}.json")
    assert snapshot(registry) == before
    assert not (registry / "evaluators").exists()


def test_bad_spec_next_to_frozen_evaluators_writes_nothing(cli, freeze, registry: Path, tmp_path: Path) -> None:
    freeze(spec_dict())
    before = snapshot(registry)
    spec_path = write_spec(tmp_path / "bad.json", spec_dict(baseline="torch"))
    assert_one_line_error(cli("-r", registry, "evaluator", "freeze", spec_path), 2, "bad.json", "baseline")
    assert snapshot(registry) == before


def test_missing_spec_file(cli, registry: Path, tmp_path: Path) -> None:
    assert_one_line_error(cli("-r", registry, "evaluator", "freeze", tmp_path / "nowhere.json"), 2, "nowhere.json")
    assert not (registry / "evaluators").exists()


def test_spec_path_is_a_directory(cli, registry: Path, tmp_path: Path) -> None:
    (tmp_path / "adir.json").mkdir()
    assert_one_line_error(cli("-r", registry, "evaluator", "freeze", tmp_path / "adir.json"), 2, "adir.json")
    assert not (registry / "evaluators").exists()


def test_freeze_into_a_registry_that_does_not_exist(cli, tmp_path: Path) -> None:
    spec_path = write_spec(tmp_path / "spec.json", spec_dict())
    missing = tmp_path / "no-registry"
    assert_one_line_error(cli("-r", missing, "evaluator", "freeze", spec_path), 2, str(missing))
    assert not missing.exists()


def test_freeze_into_a_directory_that_is_not_a_registry(cli, tmp_path: Path) -> None:
    spec_path = write_spec(tmp_path / "spec.json", spec_dict())
    plain = tmp_path / "plain"
    plain.mkdir()
    assert_one_line_error(cli("-r", plain, "evaluator", "freeze", spec_path), 2, str(plain))
    assert list(plain.iterdir()) == []


@pytest.mark.parametrize("command", [["list"], ["verify"], ["show", "kernels-xl"]])
def test_other_commands_on_a_registry_that_does_not_exist(cli, tmp_path: Path, command: list[str]) -> None:
    missing = tmp_path / "no-registry"
    assert_one_line_error(cli("-r", missing, "evaluator", *command), 2, str(missing))
    assert not missing.exists()


# --------------------------------------------------------------------------- tampering


def _edit(path: Path, change: Callable[[dict[str, Any]], None]) -> None:
    data = json.loads(path.read_text(encoding="utf-8"))
    change(data)
    path.write_text(json.dumps(data, indent=2) + "\n", encoding="utf-8")


def _spec_value(data: dict[str, Any]) -> None:
    data["spec"]["repeats"] = 6


def _sha_matches_edited_spec(data: dict[str, Any]) -> None:
    data["spec"]["repeats"] = 6
    data["sha256"] = expected_sha(data["spec"], data["evaluator_version"])


def _version(data: dict[str, Any]) -> None:
    data["evaluator_version"] = data["evaluator_version"] + 1


def _spec_name(data: dict[str, Any]) -> None:
    data["spec"]["name"] = "other-name"


def _top_level_name(data: dict[str, Any]) -> None:
    data["name"] = "other-name"


def _spec_invalid_value(data: dict[str, Any]) -> None:
    data["spec"]["repeats"] = 0


def _spec_extra_null(data: dict[str, Any]) -> None:
    data["spec"]["description"] = None


def tamper(case: str, path: Path) -> Path:
    """Tamper with the frozen file at ``path``; return the path it is then at."""
    edits = {
        "spec-value": _spec_value,
        "sha-matches-edited-spec": _sha_matches_edited_spec,
        "evaluator-version": _version,
        "spec-name": _spec_name,
        "top-level-name": _top_level_name,
        "spec-invalid-value": _spec_invalid_value,
        "spec-null-description": _spec_extra_null,
    }
    if case in edits:
        _edit(path, edits[case])
    elif case == "invalid-json":
        path.write_text(path.read_text(encoding="utf-8")[:-5], encoding="utf-8")
    elif case == "json-list":
        path.write_text(json.dumps([json.loads(path.read_text(encoding="utf-8"))]), encoding="utf-8")
    elif case == "renamed":
        renamed = path.with_name("kernels-xl@0123456789ab.json")
        path.rename(renamed)
        return renamed
    else:
        raise AssertionError(case)
    return path


TAMPERINGS = [
    "spec-value",
    "sha-matches-edited-spec",
    "evaluator-version",
    "invalid-json",
    "json-list",
    "spec-name",
    "top-level-name",
    "renamed",
    "spec-invalid-value",
    "spec-null-description",
]


@pytest.mark.parametrize("case", TAMPERINGS)
def test_verify_names_each_tampered_file(cli, freeze, registry: Path, case: str) -> None:
    intact = freeze(spec_dict(name="kernels-small", configs=["small"]))
    bad = tamper(case, freeze(spec_dict()))
    result = cli("-r", registry, "evaluator", "verify")
    assert result.code == 1, result.out
    assert str(bad) in result.out and str(intact) not in result.out
    assert "2 frozen evaluators checked, 1 does not verify" in result.out
    data = cli("-r", registry, "evaluator", "verify", "--json")
    assert data.code == 1
    body = data.json()
    assert body["checked"] == 2
    assert [m["path"] for m in body["mismatched"]] == [str(bad)]
    assert body["mismatched"][0]["problem"]


@pytest.mark.parametrize("case", TAMPERINGS)
def test_list_marks_each_tampered_file(cli, freeze, registry: Path, case: str) -> None:
    intact = freeze(spec_dict(name="kernels-small", configs=["small"]))
    bad = tamper(case, freeze(spec_dict()))
    result = cli("-r", registry, "evaluator", "list", "--json")
    assert result.code == 0
    items = {item["path"]: item for item in result.json()}
    assert set(items) == {str(intact), str(bad)}
    assert items[str(bad)]["verified"] is False and items[str(bad)]["problem"]
    assert items[str(bad)]["ref"] == bad.name[: -len(".json")]
    assert items[str(intact)]["verified"] is True and items[str(intact)]["problem"] is None
    text = cli("-r", registry, "evaluator", "list")
    assert text.code == 0 and "NO" in text.out and f"{bad.stem} no longer verifies: " in " ".join(text.out.split())


@pytest.mark.parametrize("case", TAMPERINGS)
def test_validate_reports_evaluator_integrity(cli, freeze, registry: Path, case: str) -> None:
    freeze(spec_dict(name="kernels-small", configs=["small"]))
    bad = tamper(case, freeze(spec_dict()))
    result = cli("validate", registry, "--json")
    assert result.code == 1
    problems = result.json()["problems"]
    assert [(p["rule"], p["severity"], p["file"]) for p in problems] == [("evaluator-integrity", "error", str(bad))]
    text = cli("validate", registry)
    assert text.code == 1 and "evaluator-integrity" in text.out


# `show` of a tampered file exits 1, also when the file is no longer JSON at all.
@pytest.mark.parametrize("case", TAMPERINGS)
def test_show_of_a_tampered_file_exits_1(cli, freeze, registry: Path, case: str) -> None:
    bad = tamper(case, freeze(spec_dict()))
    result = cli("-r", registry, "evaluator", "show", bad.name[: -len(".json")])
    assert result.code == 1, (result.code, result.err)
    assert "DOES NOT VERIFY" in result.out and str(bad) in result.out
    assert "Traceback" not in result.out + result.err


def test_show_json_of_a_tampered_file_exits_1(cli, freeze, registry: Path) -> None:
    tamper("spec-value", freeze(spec_dict()))
    result = cli("-r", registry, "evaluator", "show", "kernels-xl", "--json")
    assert result.json()["verified"] is False
    assert result.code == 1


def test_show_json_of_a_tampered_file_reports_it(cli, freeze, registry: Path) -> None:
    bad = tamper("spec-value", freeze(spec_dict()))
    data = cli("-r", registry, "evaluator", "show", "kernels-xl", "--json").json()
    assert data["path"] == str(bad) and data["verified"] is False
    assert "hashes to" in data["problem"]
    assert data["file"]["spec"]["repeats"] == 6


def test_refreezing_over_a_tampered_file_refuses_and_leaves_it(cli, freeze, registry: Path, tmp_path: Path) -> None:
    path = tamper("spec-value", freeze(spec_dict()))
    before = snapshot(registry)
    spec_path = write_spec(tmp_path / "again.json", spec_dict())
    result = cli("-r", registry, "evaluator", "freeze", spec_path)
    assert_one_line_error(result, 1, str(path), "never rewritten")
    assert snapshot(registry) == before


def test_reformatting_a_frozen_file_still_verifies(cli, freeze, registry: Path) -> None:
    path = freeze(spec_dict())
    data = json.loads(path.read_text(encoding="utf-8"))
    data["spec"] = dict(reversed(list(data["spec"].items())))
    path.write_text(json.dumps(data, separators=(",", ":")), encoding="utf-8")
    assert cli("-r", registry, "evaluator", "verify").code == 0


# --------------------------------------------------------------------------- verify, list, show


def test_verify_all_good(cli, freeze, registry: Path) -> None:
    freeze(spec_dict())
    freeze(spec_dict(name="kernels-xl-9", repeats=9))
    result = cli("-r", registry, "evaluator", "verify")
    assert result.code == 0 and "2 frozen evaluators checked, 0 do not verify" in result.out
    data = cli("-r", registry, "evaluator", "verify", "--json")
    assert data.code == 0 and data.json() == {"checked": 2, "mismatched": [], "inputs_changed_during_runs": []}


def test_verify_with_no_evaluators(cli, registry: Path) -> None:
    result = cli("-r", registry, "evaluator", "verify", "--json")
    assert result.code == 0 and result.json() == {"checked": 0, "mismatched": [], "inputs_changed_during_runs": []}


def test_verify_only_the_named_evaluators(cli, freeze, registry: Path) -> None:
    good = freeze(spec_dict(name="kernels-small", configs=["small"]))
    tamper("spec-value", freeze(spec_dict()))
    assert cli("-r", registry, "evaluator", "verify", "kernels-small", "--json").json() == {
        "checked": 1,
        "mismatched": [],
        "inputs_changed_during_runs": [],
    }
    assert cli("-r", registry, "evaluator", "verify", good.name[: -len(".json")]).code == 0
    assert cli("-r", registry, "evaluator", "verify", "kernels-xl").code == 1


def test_verify_unknown_reference(cli, freeze, registry: Path) -> None:
    freeze(spec_dict())
    assert_one_line_error(cli("-r", registry, "evaluator", "verify", "nothing"), 2, "nothing")


def test_list_json_items(cli, freeze, registry: Path) -> None:
    path = freeze(spec_dict())
    items = cli("-r", registry, "evaluator", "list", "--json").json()
    ref = f"kernels-xl@{expected_sha(spec_dict())[:12]}"
    assert len(items) == 1
    item = items[0]
    assert {k: item[k] for k in ("ref", "path", "verified", "problem")} == {
        "ref": ref,
        "path": str(path),
        "verified": True,
        "problem": None,
    }
    assert item["workload"] == "kernels" and item["configs"] == ["xl"] and item["backends"] == ["naive", "numpy-blas"]


def test_list_text_and_empty(cli, freeze, registry: Path) -> None:
    empty = cli("-r", registry, "evaluator", "list")
    assert empty.code == 0 and "0 frozen evaluators" in empty.out
    assert cli("-r", registry, "evaluator", "list", "--json").json() == []
    freeze(spec_dict())
    text = cli("-r", registry, "evaluator", "list")
    assert text.code == 0 and "kernels-xl@" in text.out and "1 frozen evaluator in" in text.out


def test_list_ignores_hidden_and_non_json_files(cli, freeze, registry: Path) -> None:
    freeze(spec_dict())
    (registry / "evaluators" / ".kernels-xl@0123456789ab.json.tmp").write_text("{")
    (registry / "evaluators" / ".hidden.json").write_text("{")
    (registry / "evaluators" / "notes.txt").write_text("x")
    assert len(cli("-r", registry, "evaluator", "list", "--json").json()) == 1
    assert cli("-r", registry, "evaluator", "verify").code == 0


def test_show_by_name_and_by_reference(cli, freeze, registry: Path) -> None:
    path = freeze(spec_dict())
    sha = expected_sha(spec_dict())
    ref = f"kernels-xl@{sha[:12]}"
    for given_ref in ("kernels-xl", ref):
        result = cli("-r", registry, "evaluator", "show", given_ref)
        assert result.code == 0, result.err
        assert ref in result.out and sha in result.out and "verifies" in result.out
        assert '"baseline": "numpy-blas"' in result.out
    data = cli("-r", registry, "evaluator", "show", ref, "--json")
    assert data.code == 0
    assert data.json() == {
        "path": str(path),
        "verified": True,
        "problem": None,
        "consent": None,  # it runs no command
        "file": json.loads(path.read_text(encoding="utf-8")),
    }


def test_show_ambiguous_name_needs_the_hash(cli, freeze, registry: Path) -> None:
    first = freeze(spec_dict())
    second = registry / "evaluators" / freeze(spec_dict(repeats=9), elsewhere=True).name  # merged from a clone
    second.write_bytes((second.parent.parent.parent / "clone-1" / "evaluators" / second.name).read_bytes())
    result = cli("-r", registry, "evaluator", "show", "kernels-xl")
    assert_one_line_error(result, 2, "ambiguous", first.name[: -len(".json")], second.name[: -len(".json")])
    assert cli("-r", registry, "evaluator", "show", second.name[: -len(".json")]).code == 0


@pytest.mark.parametrize("ref", ["nothing", "kernels-xl@000000000000", "kernels-xl@xyz", "kernels-xl@0123456789AB"])
def test_show_unknown_or_malformed_reference(cli, freeze, registry: Path, ref: str) -> None:
    freeze(spec_dict())
    before = snapshot(registry)
    assert_one_line_error(cli("-r", registry, "evaluator", "show", ref), 2, ref)
    assert snapshot(registry) == before


def test_show_with_nothing_frozen_hints_at_freeze(cli, registry: Path) -> None:
    assert_one_line_error(cli("-r", registry, "evaluator", "show", "kernels-xl"), 2, "kernels-xl", "evaluator freeze")


# --------------------------------------------------------------------------- validate


def test_validate_accepts_an_attempt_naming_a_frozen_evaluator(cli, freeze, registry: Path) -> None:
    path = freeze(spec_dict())
    ref = path.name[: -len(".json")]
    (registry / "probe.json").write_text(json.dumps(complete_record("probe", evaluator=ref)), encoding="utf-8")
    result = cli("validate", registry, "--json")
    assert result.code == 0, result.out
    assert result.json()["problems"] == [] and result.json()["attempts"] == 1


def test_validate_reports_an_evaluator_that_is_not_frozen(cli, tmp_path: Path) -> None:
    root = write_registry(
        tmp_path / "other", [complete_record("ok"), complete_record("probe", evaluator="x@0123456789ab")]
    )
    result = cli("validate", root, "--json")
    assert result.code == 1
    problems = result.json()["problems"]
    assert [(p["rule"], p["severity"], p["attempt_id"], p["pointer"], p["file"]) for p in problems] == [
        ("evaluator", "error", "probe", "/evaluator", str(root / "probe.json"))
    ]
    assert "x@0123456789ab" in problems[0]["message"]


def test_validate_evaluator_rule_after_a_frozen_file_is_renamed(cli, freeze, registry: Path) -> None:
    path = freeze(spec_dict())
    ref = path.name[: -len(".json")]
    (registry / "probe.json").write_text(json.dumps(complete_record("probe", evaluator=ref)), encoding="utf-8")
    tamper("renamed", path)
    rules = sorted(p["rule"] for p in cli("validate", registry, "--json").json()["problems"])
    assert rules == ["evaluator", "evaluator-integrity"]


def test_validate_ignores_the_evaluators_directory_as_attempts(cli, freeze, registry: Path) -> None:
    freeze(spec_dict())
    result = cli("validate", registry, "--json")
    assert result.code == 0 and result.json()["attempts"] == 0 and result.json()["problems"] == []


# --------------------------------------------------------------------------- schema


@pytest.fixture(scope="module")
def evaluator_schema() -> Draft202012Validator:
    schema = json.loads((SCHEMAS / "evaluator.schema.json").read_text(encoding="utf-8"))
    Draft202012Validator.check_schema(schema)
    return Draft202012Validator(schema)


def test_schema_accepts_a_frozen_file(freeze, evaluator_schema: Draft202012Validator) -> None:
    described = spec_dict(
        name="tinygpt-xl", description="Kernels at xl.", workload="tinygpt-train", metric="ms-per-step"
    )
    for spec in (spec_dict(), described):
        data = json.loads(freeze(spec).read_text(encoding="utf-8"))
        errors = [e.message for e in evaluator_schema.iter_errors(data)]
        assert errors == []


@pytest.mark.parametrize(
    "change",
    [
        lambda d: d.pop("sha256"),
        lambda d: d.update(sha256="not-a-hash"),
        lambda d: d.update(extra=1),
        lambda d: d["spec"].pop("seed"),
        lambda d: d["spec"].update(workload="Not A Slug"),
        lambda d: d["spec"]["tolerance"].update(ulp=1),
    ],
    ids=["no-sha256", "bad-sha256", "extra-field", "spec-missing-seed", "spec-bad-workload", "tolerance-extra"],
)
def test_schema_rejects_a_malformed_frozen_file(freeze, evaluator_schema: Draft202012Validator, change) -> None:
    data = json.loads(freeze(spec_dict()).read_text(encoding="utf-8"))
    change(data)
    assert list(evaluator_schema.iter_errors(data))


# --------------------------------------------------------------------------- backend names, removal


def test_a_mistyped_backend_gets_the_registered_name_it_meant(cli, registry: Path, tmp_path: Path) -> None:
    spec = write_spec(tmp_path / "typo.json", spec_dict(backends=["naive", "numpy_blas"]))
    result = cli("-r", registry, "evaluator", "freeze", spec)
    assert_one_line_error(result, 2, "#/backends/1", "'numpy_blas' is not a backend name", "did you mean: numpy-blas")
    assert "pattern" not in result.err and not frozen_files(registry)


def test_a_backend_not_registered_here_is_frozen_with_a_warning(cli, registry: Path, tmp_path: Path) -> None:
    spec = write_spec(tmp_path / "tpu.json", spec_dict(backends=["naive", "tpu-magic"], baseline="naive"))
    result = cli("-r", registry, "evaluator", "freeze", spec)
    assert result.code == 0, result.err
    assert "warning: backend 'tpu-magic' is not registered here" in " ".join(result.err.split())
    assert "numpy-blas" in result.err  # what is registered, to choose from
    assert json.loads(cli("-r", registry, "evaluator", "freeze", spec, "--json").out)["warnings"]


def test_a_spec_error_says_it_in_ptregs_words(cli, registry: Path, tmp_path: Path) -> None:
    spec = write_spec(tmp_path / "base.json", spec_dict(baseline="numba"))
    result = cli("-r", registry, "evaluator", "freeze", spec)
    assert_one_line_error(result, 2, "baseline 'numba' is not one of the backends")
    assert "Value error" not in result.err


def test_an_evaluator_nothing_rests_on_can_be_removed(cli, freeze, registry: Path) -> None:
    ref = freeze(spec_dict()).stem
    done = cli("-r", registry, "evaluator", "remove", ref)
    assert done.code == 0, done.err
    assert f"removed {ref}" in done.out and not frozen_files(registry)
    assert_one_line_error(cli("-r", registry, "evaluator", "remove", ref), 2, "no frozen evaluator")


def test_an_evaluator_an_attempt_names_is_kept(cli, freeze, registry: Path) -> None:
    ref = freeze(spec_dict()).stem
    record = complete_record("uses-it", evaluator=ref)
    (registry / "uses-it.json").write_text(json.dumps(record))
    before = snapshot(registry)
    assert_one_line_error(cli("-r", registry, "evaluator", "remove", ref), 1, f"{ref} is used by uses-it")
    assert snapshot(registry) == before
