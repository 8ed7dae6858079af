"""list filters, lineage, streaks and coverage: on the shared registry (expected values
computed from the raw JSON, or stated in ../shared/data/README.md) and on synthetic chains.

Every test runs twice: once answered from the query index (store/index.py), once from a full
read of every record file (``PTREG_INDEX=off``, and ``load_directory`` for the library), the
way ptreg answered before it kept an index."""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from helpers import NEGATIVE, complete_record, failed_record, raw_chain, raw_descendants, write_registry
from ptreg.records.attempt import COVERED_FIELDS, Attempt
from ptreg.records.graph import ancestry, successors
from ptreg.records.ledger import Filter
from ptreg.store.directory import load_directory
from ptreg.store.index import open_index
from ptreg.views.queries import coverage, select
from ptreg.views.streaks import CAUTION, OK, STOP, streaks


@pytest.fixture(autouse=True, params=["index", "every-file"])
def read_path(request, monkeypatch: pytest.MonkeyPatch) -> str:
    if request.param == "every-file":
        monkeypatch.setenv("PTREG_INDEX", "off")
    return request.param


def attempts_of(root: Path, read_path: str) -> list[Any]:
    """The registry's attempts as the queries get them: the index's summaries, or whole records."""
    if read_path == "every-file":
        return load_directory(root).attempts
    index = open_index(root)
    try:
        return index.summaries()
    finally:
        index.close()


def listed_ids(cli, registry: Path, *args: str) -> list[str]:
    result = cli("--registry", registry, "list", "--json", *args)
    assert result.code == 0, result.err
    return [a["id"] for a in result.json()]


def raw_ids(raw: dict[str, Any], keep: Callable[[dict[str, Any]], bool]) -> list[str]:
    return sorted(a["id"] for a in raw["attempts"] if keep(a))


# --------------------------------------------------------------------------- list on the shared registry


@pytest.mark.parametrize(
    "args, keep, readme_count",
    [
        (["--method", "dpo"], lambda a: "dpo" in (a.get("methods") or []), 2),
        (["--failures-only"], lambda a: a["status"] in NEGATIVE, 11 + 5 + 5),
        (["--status", "worked"], lambda a: a["status"] == "worked", 4),
        (["--status", "failed", "--status", "regressed"], lambda a: a["status"] in ("failed", "regressed"), 16),
        (["--kind", "infrastructure"], lambda a: a["kind"] == "infrastructure", 28),
        (["--kind", "model-evaluation"], lambda a: a["kind"] == "model-evaluation", 8),
        (["--family", "runtime-perf"], lambda a: a["family"] == "runtime-perf", 14),
        (["--family", "sql"], lambda a: a["family"] == "sql", 17),
        (["--family", "sql", "--family", "file-ops"], lambda a: a["family"] in ("sql", "file-ops"), 20),
        (
            ["--method", "dpo", "--method", "simpo"],
            lambda a: bool({"dpo", "simpo"} & set(a.get("methods") or [])),
            None,
        ),
        (
            ["--method", "lora", "--base", "qwen3-4b"],
            lambda a: "lora" in (a.get("methods") or []) and "qwen3-4b" in (a.get("bases") or []),
            None,
        ),
        (
            ["--method", "lora", "--method", "dora", "--base", "qwen3-4b", "--base", "qwen3-0.6b"],
            lambda a: (
                bool({"lora", "dora"} & set(a.get("methods") or []))
                and bool({"qwen3-4b", "qwen3-0.6b"} & set(a.get("bases") or []))
            ),
            None,
        ),
        (
            ["--objective", "sql-exact-match", "--failures-only"],
            lambda a: a.get("objective") == "sql-exact-match" and a["status"] in NEGATIVE,
            None,
        ),
        (["--status", "worked", "--failures-only"], lambda a: False, 0),
        (["--method", "no-such-method"], lambda a: False, 0),
    ],
)
def test_list_filters_on_the_shared_registry(
    cli, shared_registry: Path, shared_raw: dict[str, Any], args: list[str], keep, readme_count
) -> None:
    expected = raw_ids(shared_raw, keep)
    if readme_count is not None:
        assert len(expected) == readme_count, "the raw file disagrees with data/README.md"
    assert sorted(listed_ids(cli, shared_registry, *args)) == expected


def test_or_within_methods_and_and_across_methods_and_bases(
    shared_raw: dict[str, Any], shared_registry: Path, read_path: str
) -> None:
    attempts = attempts_of(shared_registry, read_path)
    dpo = {a.id for a in select(attempts, Filter(methods=["dpo"]))}
    simpo = {a.id for a in select(attempts, Filter(methods=["simpo"]))}
    both = {a.id for a in select(attempts, Filter(methods=["dpo", "simpo"]))}
    assert both == dpo | simpo and len(both) > max(len(dpo), len(simpo))
    lora = {a.id for a in select(attempts, Filter(methods=["lora"]))}
    q4b = {a.id for a in select(attempts, Filter(bases=["qwen3-4b"]))}
    lora_q4b = {a.id for a in select(attempts, Filter(methods=["lora"], bases=["qwen3-4b"]))}
    assert lora_q4b == lora & q4b
    assert lora_q4b < lora and lora_q4b < q4b, "the data should make AND differ from either alone"


def test_list_text_output_counts(cli, shared_registry: Path) -> None:
    result = cli("--registry", shared_registry, "list", "--method", "dpo")
    assert result.code == 0
    assert result.out.strip().splitlines()[-1] == "2 of 66 attempts"
    assert "sql-hygiene-dpo-higher-pressure" in result.out


# --------------------------------------------------------------------------- lineage on the shared registry


def test_lineage_of_the_higher_pressure_retry(cli, shared_registry: Path, shared_raw: dict[str, Any]) -> None:
    expected = ["sql-hygiene-simpo-dpo", "sql-hygiene-dpo-refanchored", "sql-hygiene-dpo-higher-pressure"]
    assert raw_chain(shared_raw["attempts"], "sql-hygiene-dpo-higher-pressure") == expected
    result = cli("--registry", shared_registry, "lineage", "sql-hygiene-dpo-higher-pressure", "--json")
    assert result.code == 0, result.err
    data = result.json()
    assert [step["id"] for step in data["chain"]] == expected
    by_id = {a["id"]: a for a in shared_raw["attempts"]}
    assert [step["varied"] for step in data["chain"]] == [by_id[i].get("varied") for i in expected]
    assert data["superseded_by"] == []
    assert data["missing_ancestor"] is None

    text = cli("--registry", shared_registry, "lineage", "sql-hygiene-dpo-higher-pressure").out
    positions = [text.index(i) for i in expected]
    assert positions == sorted(positions), "oldest first"
    assert by_id["sql-hygiene-dpo-higher-pressure"]["varied"] in text
    assert "superseded by: nothing yet" in text


def test_lineage_of_bmc2_v2_names_what_superseded_it(cli, shared_registry: Path, shared_raw: dict[str, Any]) -> None:
    raw = shared_raw["attempts"]
    data = cli("--registry", shared_registry, "lineage", "sql-public-bmc2-v2", "--json").json()
    assert (
        [s["id"] for s in data["chain"]]
        == raw_chain(raw, "sql-public-bmc2-v2")
        == [
            "sql-public-bmc2-v1",
            "sql-public-bmc2-v2",
        ]
    )
    later = {s["id"]: s["depth"] for s in data["superseded_by"]}
    assert set(later) == raw_descendants(raw, "sql-public-bmc2-v2")
    assert later["sql-public-bmc2-v3"] == 1
    direct = {a["id"] for a in raw if a.get("varied_from") == "sql-public-bmc2-v2"}
    assert {i for i, d in later.items() if d == 1} == direct
    assert len(data["superseded_by"]) == len(later), "each successor once"


def test_lineage_library_on_synthetic_tree(tmp_path: Path, read_path: str) -> None:
    root = write_registry(
        tmp_path / "reg",
        [
            complete_record("a"),
            complete_record("b", varied_from="a", varied="ab"),
            complete_record("c", varied_from="b", varied="bc"),
            complete_record("d", varied_from="a", varied="ad"),
            complete_record("e"),
        ],
    )
    by_id = {a.id: a for a in attempts_of(root, read_path)}
    assert [x.id for x in ancestry("c", by_id)] == ["a", "b", "c"]
    assert [(s.attempt.id, s.depth) for s in successors("a", by_id)] == [("b", 1), ("c", 2), ("d", 1)]
    assert successors("e", by_id) == [] and [x.id for x in ancestry("e", by_id)] == ["e"]


def test_lineage_shows_direct_successors_first_then_the_rest_indented(cli, tmp_path: Path) -> None:
    """As the source project's query tool names them: what varies the attempt directly; ptreg
    then shows, indented, what descends from those."""
    root = write_registry(
        tmp_path / "reg",
        [
            complete_record("a"),
            complete_record("b", varied_from="a", varied="ab"),
            complete_record("c", varied_from="b", varied="bc"),
            complete_record("d", varied_from="c", varied="cd"),
            complete_record("e", varied_from="a", varied="ae"),
        ],
    )
    lines = cli("--registry", root, "lineage", "a").out.splitlines()
    start = lines.index("superseded by:")
    assert lines[start + 1 : start + 3] == ["  b [worked]: ab", "  e [worked]: ae"]
    assert lines[start + 3 :] == [
        "  and, descending from those:",
        "    c [worked] varies b: bc",
        "      d [worked] varies c: cd",
    ]
    data = cli("--registry", root, "lineage", "a", "--json").json()
    assert [(s["id"], s["depth"], s["varied_from"]) for s in data["superseded_by"]] == [
        ("b", 1, "a"),
        ("e", 1, "a"),
        ("c", 2, "b"),
        ("d", 3, "c"),
    ]


def test_streak_ties_follow_the_ledgers_lineage_walk(tmp_path: Path) -> None:
    """Equal negatives and depth: the order the original tool walks the lineages in, roots in the
    ledger's order and each tree depth first, not the order of the tips' ids or places."""
    from ptreg.records.attempt import Attempt

    records = [
        complete_record("r", objective="kernel-throughput"),
        failed_record("r-late", varied_from="r", varied="x", objective="peak-memory"),
        complete_record("q", objective="command-latency"),
        failed_record("q-tip", varied_from="q", varied="y", objective="training-step-time"),
    ]
    for position, record in enumerate(records):
        record["origin"] = {
            "file": "l.json",
            "schema_version": 2,
            "position": position,
            "keys": list(record),
            "imported_at": "2026-01-01T00:00:00Z",
            "import_number": 1,
        }
    attempts = [Attempt.model_validate(r) for r in records]
    found = [s.objective for s in streaks(reversed(attempts)) if s.negatives == 1]
    assert found == ["peak-memory", "training-step-time"]


# --------------------------------------------------------------------------- streaks


def test_output_format_streak_on_the_shared_registry(cli, shared_registry: Path, shared_raw: dict[str, Any]) -> None:
    chain = raw_chain(shared_raw["attempts"], "sql-hygiene-dpo-higher-pressure")
    by_id = {a["id"]: a for a in shared_raw["attempts"]}
    assert all(by_id[i]["status"] in NEGATIVE and by_id[i]["objective"] == "output-format" for i in chain)
    data = {s["objective"]: s for s in cli("--registry", shared_registry, "streaks", "--json").json()}
    found = data["output-format"]
    assert found["level"] == "STOP AND RETHINK"
    assert found["negatives"] == 3
    assert found["chain"] == chain and found["tip"] == "sql-hygiene-dpo-higher-pressure"
    assert found["tip_lesson"] == by_id["sql-hygiene-dpo-higher-pressure"]["lesson"]
    objectives = {a["objective"] for a in shared_raw["attempts"] if a.get("objective")}
    assert set(data) == objectives, "one streak per objective in use"

    text = cli("--registry", shared_registry, "streaks").out
    assert "STOP AND RETHINK: output-format" in text
    assert by_id["sql-hygiene-dpo-higher-pressure"]["lesson"] in text


def test_streak_levels_agree_with_their_tips(shared_registry: Path, read_path: str) -> None:
    by_id = {a.id: a for a in attempts_of(shared_registry, read_path)}
    for s in streaks(by_id.values()):
        count = 0
        for a in reversed(s.chain):
            if a.objective != s.objective or a.status not in NEGATIVE:
                break
            count += 1
        assert s.negatives == count, s.objective
        assert s.level == (STOP if count >= 3 else CAUTION if count == 2 else OK)


def chain(*statuses: str, objective: str = "training-step-time", prefix: str = "s") -> list[dict[str, Any]]:
    records = []
    for i, status in enumerate(statuses):
        make = failed_record if status in NEGATIVE else complete_record
        extra = {"varied_from": f"{prefix}{i - 1}", "varied": f"step {i}"} if i else {}
        records.append(make(f"{prefix}{i}", status=status, objective=objective, **extra))
    return records


def streak_of(tmp_path: Path, records: list[dict[str, Any]], objective: str = "training-step-time"):
    read = "every-file" if os.environ.get("PTREG_INDEX") == "off" else "index"
    attempts = attempts_of(write_registry(tmp_path / "reg", records), read)
    return {s.objective: s for s in streaks(attempts)}[objective]


def test_failed_failed_then_worked_does_not_warn(tmp_path: Path) -> None:
    s = streak_of(tmp_path, chain("failed", "failed", "worked"))
    assert s.level == OK and s.negatives == 0 and [a.id for a in s.chain] == ["s0", "s1", "s2"]


def test_two_negatives_is_caution(tmp_path: Path) -> None:
    s = streak_of(tmp_path, chain("worked", "failed", "regressed"))
    assert s.level == CAUTION and s.negatives == 2 and s.tip.id == "s2"


def test_three_negatives_is_stop(tmp_path: Path) -> None:
    s = streak_of(tmp_path, chain("worked", "failed", "inconclusive", "regressed"))
    assert s.level == STOP and s.negatives == 3


def test_worked_with_caveat_breaks_a_streak(tmp_path: Path) -> None:
    assert streak_of(tmp_path, chain("failed", "failed", "worked-with-caveat")).level == OK


def test_a_not_tried_proposal_at_the_tip_neither_breaks_nor_extends_a_streak(tmp_path: Path) -> None:
    s = streak_of(tmp_path, chain("worked", "failed", "failed", "failed", "not-tried", "not-tried"))
    assert s.level == STOP and [a.id for a in s.trailing] == ["s1", "s2", "s3"] and s.tip.id == "s5"
    # one not tried in the middle of a chain is an attempt that never happened: it ends the count there
    assert streak_of(tmp_path / "2", chain("failed", "not-tried", "failed", "failed")).negatives == 2


def test_deepest_chain_counts(tmp_path: Path) -> None:
    records = chain("failed", "failed", "failed", "worked") + chain("failed", "failed", prefix="t")
    s = streak_of(tmp_path, records)
    assert [a.id for a in s.chain] == ["s0", "s1", "s2", "s3"] and s.level == OK


def test_streaks_are_per_objective(tmp_path: Path, read_path: str) -> None:
    records = chain("failed", "failed", objective="peak-memory") + chain(
        "worked", "worked", objective="kernel-throughput", prefix="k"
    )
    attempts = attempts_of(write_registry(tmp_path / "reg", records), read_path)
    levels = {s.objective: s.level for s in streaks(attempts)}
    assert levels == {"peak-memory": CAUTION, "kernel-throughput": OK}


def test_streaks_cli_text_names_chain_and_lesson(cli, tmp_path: Path) -> None:
    records = chain("worked", "failed", "failed")
    root = write_registry(tmp_path / "reg", records)
    result = cli("--registry", root, "streaks")
    assert result.code == 0
    assert "CAUTION: training-step-time ends in 2 negatives at s2: s1 -> s2" in result.out
    assert records[-1]["lesson"] in result.out
    assert "whole chain (oldest first): s0 -> s1 -> s2" in result.out
    assert "s1 -> s2 (after s0)" in result.out, "the table's chain starts with the negatives at the tip"


# --------------------------------------------------------------------------- coverage


def test_coverage_on_the_shared_registry(cli, shared_registry: Path, shared_raw: dict[str, Any]) -> None:
    shaped = [a for a in shared_raw["attempts"] if a["kind"] != "infrastructure"]
    assert len(shaped) == 66 - 28
    data = cli("--registry", shared_registry, "coverage", "--json").json()
    assert data["non_infrastructure_attempts"] == len(shaped)
    carried = {f["field"]: f["carried"] for f in data["fields"]}
    assert set(carried) == set(COVERED_FIELDS)
    for name in COVERED_FIELDS:
        assert carried[name] == sum(1 for a in shaped if a.get(name) not in (None, [])), name
    # data/README.md: methods / bases / objective on 38, varied_from on 22, data_rows on 17
    assert (carried["methods"], carried["objective"], carried["varied_from"], carried["data_rows"]) == (38, 38, 22, 17)
    assert all(f["total"] == len(shaped) for f in data["fields"])

    used: dict[tuple[str, str], int] = {}
    for a in shared_raw["attempts"]:
        for m in a.get("methods") or []:
            used[("method", m)] = used.get(("method", m), 0) + 1
        if a.get("objective"):
            used[("objective", a["objective"])] = used.get(("objective", a["objective"]), 0) + 1
        used[("kind", a["kind"])] = used.get(("kind", a["kind"]), 0) + 1
        for b in a.get("bases") or []:
            used[("base", b)] = used.get(("base", b), 0) + 1
    reported = {(t["vocabulary"], t["term"]): t["count"] for t in data["vocabulary"] if t["count"]}
    assert reported == used
    defined = {(t["vocabulary"], t["term"]) for t in data["vocabulary"] if t["defined"] is True}
    vocabularies = {"method": "method_vocabulary", "objective": "objective_vocabulary", "kind": "kind_vocabulary"}
    assert defined == {(v, term) for v, key in vocabularies.items() for term in shared_raw[key]}

    text = cli("--registry", shared_registry, "coverage").out
    assert f"shape fields of {len(shaped)} non-infrastructure attempts" in text


def test_coverage_flags_terms_outside_the_vocabulary(tmp_path: Path, read_path: str) -> None:
    records = [
        complete_record("a", methods=["cache-blocking", "magic"]),
        complete_record("b", kind="infrastructure", methods=None, bases=None, objective=None, data_rows=None),
        complete_record("c", data_rows=None),
    ]
    root = write_registry(tmp_path / "reg", records)
    if read_path == "every-file":
        registry = load_directory(root)
        result = coverage(registry.attempts, registry.meta)
    else:
        index = open_index(root)
        try:
            result = coverage(index.summaries(), index.vocabularies())
        finally:
            index.close()
    assert result.shaped_total == 2
    fields = {f.field: f.carried for f in result.fields}
    assert fields == {"methods": 2, "bases": 2, "objective": 2, "data_rows": 1, "varied_from": 0}
    terms = {(t.vocabulary, t.term): (t.count, t.defined) for t in result.terms}
    assert terms[("method", "magic")] == (1, False)
    assert terms[("method", "cache-blocking")] == (2, True)
    assert terms[("method", "vendor-blas")] == (0, True)
    assert terms[("base", "matmul-f32")] == (2, None)


def test_filter_is_and_across_criteria() -> None:
    a = Attempt.model_validate(complete_record("a"))
    assert Filter(statuses=["worked"], kinds=["runtime-benchmark"]).matches(a)
    assert not Filter(statuses=["worked"], kinds=["infrastructure"]).matches(a)
    assert not Filter(failures_only=True).matches(a)
    assert Filter(bases=["matmul-f32", "other"]).matches(a)
    assert not Filter(methods=["cache-blocking"], bases=["other"]).matches(a)
    unknown = Attempt.model_validate({"id": "u", "name": "u", "status": "failed"})
    assert not Filter(families=["runtime-perf"]).matches(unknown)
    assert Filter(failures_only=True).matches(unknown)
