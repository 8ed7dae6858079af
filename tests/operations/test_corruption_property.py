"""Property: however a valid record file is corrupted, reading the registry reports problems
(or refuses with one line), and never fails any other way.

A valid record is serialized, then broken structurally (a key deleted, a value of another
type, the record wrapped in a list, deep nesting, a key twice, a file name that disagrees
with the id) and byte by byte (truncated, a byte flipped, random bytes inserted: invalid
UTF-8, NUL, stray brackets, lone surrogate escapes), and written into a registry beside a
valid record. A number is also replaced by one past what a store holds (an integer outside
SQLite's 64 bits, NaN, an infinity, a literal a double reads as infinity).
"""

from __future__ import annotations

import json
import math
import random
import tempfile
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from helpers import complete_record
from ptreg.errors import PtregError
from ptreg.operations.validate import validate_path
from ptreg.records.attempt import CONFIDENCES, STATUSES, STATUSES_NEEDING_REASON
from ptreg.store.directory import init_registry

ids = st.from_regex(r"[a-z0-9][a-z0-9-]{0,24}(\.[a-z0-9-]{1,8}){0,2}", fullmatch=True).filter(lambda i: i != "registry")
texts = st.text(min_size=1, max_size=40)
# Fields complete_record sets that a record may leave unknown.
OPTIONAL = (
    "family",
    "evidence",
    "lesson",
    "next_action",
    "evidence_sources",
    "source",
    "kind",
    "methods",
    "bases",
    "objective",
    "data_rows",
)
json_scalars = st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False, allow_infinity=False) | texts
json_values = st.recursive(
    json_scalars,
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=8), inner, max_size=3),
    max_leaves=8,
)
# Numbers at and past the edges of what the stores hold: SQLite's signed 64 bits, a double.
HOSTILE_NUMBERS = (
    st.sampled_from(
        [2**63 - 1, 2**63, -(2**63), -(2**63) - 1, 2**64, 10**30, math.nan, math.inf, -math.inf, 1.7976931348623157e308]
    )
    | st.integers()
)
INSERTS = st.binary(min_size=1, max_size=6) | st.sampled_from(
    [b"\x00", b"\xff", b"\xc3", b"\xed\xa0\x80", b"\\ud800", b"\\u0000", b"[", b"]", b"{", b"}", b'"', b",", b":"]
)


@st.composite
def records(draw) -> dict[str, Any]:
    status = draw(st.sampled_from(STATUSES))
    changes: dict[str, Any] = {
        "name": draw(texts),
        "evidence": draw(texts),
        "lesson": draw(texts),
        "next_action": draw(texts),
        "status": status,
        "data_rows": draw(st.integers(0, 10**9)),
        "methods": draw(
            st.lists(st.sampled_from(["cache-blocking", "vectorization", "lazy-import"]), min_size=1, max_size=3)
        ),
    }
    if status in STATUSES_NEEDING_REASON:
        changes["failure_reason"] = draw(texts)
        changes["failure_reason_confidence"] = draw(st.sampled_from([c for c in CONFIDENCES if c != "not-applicable"]))
    if draw(st.booleans()):
        changes["varied_from"] = draw(ids)
        changes["varied"] = draw(texts)
    for name in draw(st.sets(st.sampled_from(OPTIONAL), max_size=3)):
        changes[name] = None
    return complete_record(draw(ids), **changes)


def _type_name(value: Any) -> str:
    return type(value).__name__


@st.composite
def corrupted_files(draw) -> tuple[str, bytes, str]:
    """(file name, bytes, what was done): a valid record, then one to three corruptions."""
    record = draw(records())
    name = record["id"]
    nest_text = None
    done = []
    for step in draw(
        st.lists(
            st.sampled_from(["delete-key", "retype", "renumber", "wrap", "nest", "rename", "none"]),
            min_size=1,
            max_size=2,
        )
    ):
        if step == "delete-key" and isinstance(record, dict) and record:
            key = draw(st.sampled_from(sorted(record)))
            del record[key]
            done.append(f"deleted {key}")
        elif step == "retype" and isinstance(record, dict) and record:
            key = draw(st.sampled_from(sorted(record)))
            old = record[key]
            record[key] = draw(json_values.filter(lambda v, old=old: _type_name(v) != _type_name(old)))
            done.append(f"retyped {key}")
        elif step == "renumber" and isinstance(record, dict):
            key = draw(st.sampled_from(["data_rows", "origin"]))
            number = draw(HOSTILE_NUMBERS)
            if key == "origin":  # the integers of the ledger's order, which the index stores
                field = draw(st.sampled_from(["position", "import_number"]))
                record["origin"] = {"file": "a.json", "schema_version": 2, "position": 0, "keys": ["id"], field: number}
            else:
                record[key] = number
            done.append(f"renumbered {key} to {number!r}")
        elif step == "wrap":
            record = [record]
            done.append("wrapped in a list")
        elif step == "nest" and nest_text is None:
            depth = draw(st.integers(1, 3000))
            nest_text = "[" * depth + "]" * depth  # built as text: json.dumps itself would recurse too deep
            done.append(f"nested {depth} deep")
        elif step == "rename":
            name = draw(ids.filter(lambda i, name=name: i != name))
            done.append(f"renamed to {name}.json")
    text = json.dumps(record, ensure_ascii=draw(st.booleans()), indent=draw(st.sampled_from([None, 2])))
    if nest_text is not None:
        if isinstance(record, dict) and draw(st.booleans()):
            key = draw(st.sampled_from([*sorted(record), "question"])) if record else "question"
            text = text.rstrip()[:-1].rstrip() + ("," if record else "") + f' "{key}": {nest_text}}}'
        else:
            text = nest_text
    if draw(st.booleans()) and text.startswith("{") and isinstance(record, dict) and record:
        key = draw(st.sampled_from(sorted(record)))
        text = "{" + json.dumps(key) + ": " + json.dumps(draw(json_values)) + ", " + text[1:]
        done.append(f"duplicated {key}")
    data = text.encode("utf-8")
    for step in draw(st.lists(st.sampled_from(["truncate", "flip", "insert", "none"]), max_size=3)):
        if step == "truncate":
            cut = draw(st.integers(0, len(data)))
            data = data[:cut]
            done.append(f"truncated at {cut}")
        elif step == "flip" and data:
            at = draw(st.integers(0, len(data) - 1))
            data = data[:at] + bytes([data[at] ^ draw(st.integers(1, 255))]) + data[at + 1 :]
            done.append(f"flipped byte {at}")
        elif step == "insert":
            at = draw(st.integers(0, len(data)))
            data = data[:at] + draw(INSERTS) + data[at:]
            done.append(f"inserted at {at}")
    return f"{name}.json", data, ", ".join(done) or "none"


def one_line(text: str) -> bool:
    return bool(text.strip()) and len(text.splitlines()) == 1


def check(files: list[tuple[str, bytes, str]], cli) -> None:
    with tempfile.TemporaryDirectory() as work:
        root = Path(work) / "reg"
        init_registry(root)
        (root / "anchor.json").write_text(json.dumps(complete_record("anchor")), encoding="utf-8")
        for name, data, _ in files:
            if name not in ("registry.json", "anchor.json"):
                (root / name).write_bytes(data)
        try:
            _, problems = validate_path(root)
        except PtregError as exc:
            assert one_line(exc.message), exc.message
        else:
            for problem in problems:
                assert one_line(problem.message), problem
                assert problem.file and one_line(problem.location()), problem
                assert problem.attempt_id is None or problem.attempt_id.isprintable(), problem
        for command in (["validate"], ["list", "--json"]):
            result = cli("-r", root, *command)
            assert result.code in (0, 1, 2), (command, result.code, result.err[:500])
            assert "Traceback" not in result.out + result.err, (command, result.err[:2000])
            if result.code == 2:
                assert one_line(result.err) and result.err.startswith("ptreg: error: "), result.err[:500]


# A function-scoped fixture (cli) is shared by the examples of one test: it is stateless
# between calls (each call reads the captured output first), so that is safe here.
SHARED_FIXTURE = [HealthCheck.function_scoped_fixture, HealthCheck.too_slow, HealthCheck.data_too_large]


@settings(max_examples=150, deadline=None, suppress_health_check=SHARED_FIXTURE)
@given(files=st.lists(corrupted_files(), min_size=1, max_size=3))
def test_corrupted_records_are_reported_never_crash(files, cli) -> None:
    check(files, cli)


@pytest.mark.slow
@settings(max_examples=3000, deadline=None, suppress_health_check=SHARED_FIXTURE)
@given(files=st.lists(corrupted_files(), min_size=1, max_size=3))
def test_corrupted_records_are_reported_never_crash_many(files, cli) -> None:
    check(files, cli)


def test_random_bytes_anywhere_in_a_record(cli) -> None:
    """Every single-byte change of one record, at a fixed seed: a dense sweep the property
    above samples only thinly."""
    chooser = random.Random(6)
    text = json.dumps(complete_record("sweep", varied_from="anchor", varied="tile 32"), indent=2).encode("utf-8")
    for at in range(0, len(text), 11):
        replacement = bytes([chooser.choice([0, 0x22, 0x5B, 0x5C, 0x7B, 0x7D, 0x80, 0xC3, 0xFF])])
        check([("sweep.json", text[:at] + replacement + text[at + 1 :], f"byte {at}")], cli)


EDGES = [2**63 - 1, 2**63, -(2**63) - 1, 2**64, 10**30, math.nan, math.inf, -math.inf, 1.7976931348623157e308]


@pytest.mark.parametrize("number", EDGES, ids=repr)
@pytest.mark.parametrize("field", ["data_rows", "position", "import_number"])
def test_numbers_at_the_edges_of_the_stores(field: str, number: Any, cli) -> None:
    """Each edge in each integer the query index stores, for sure (the property above samples
    them among everything else): refused in one line, or listed; never an OverflowError."""
    if field == "data_rows":
        record = complete_record("edge", data_rows=number)
    else:
        origin = {"file": "a.json", "schema_version": 2, "position": 0, "keys": ["id"], field: number}
        record = complete_record("edge", origin=origin)
    check([("edge.json", json.dumps(record).encode("utf-8"), f"{field} {number!r}")], cli)
