"""`ptreg next`'s suggestions: each kind found from the records and runs that say it, cited,
in the documented order; nothing suggested that no record says."""

from __future__ import annotations

from contextlib import closing
from pathlib import Path
from types import SimpleNamespace

from helpers import add_run, complete_record, failed_record, step_cell, step_results, write_registry
from ptreg.operations.conclude import Verdict, conclude
from ptreg.records.condition_grammar import parse
from ptreg.records.ledger import in_ledger_order
from ptreg.store.directory import read_attempt
from ptreg.store.index import open_index
from ptreg.views.suggestions import KINDS, Suggestion, suggestions_of

RULE = "ms_per_step(backend=naive, config=tiny) > 0"

RUN = "20260101T000000Z"


def _registry(root: Path) -> Path:
    """Every kind of suggestion once: a STOP AND RETHINK streak, a measured attempt whose
    condition holds, one whose condition does not, a run with no verdict, an attempt never run,
    and a concluded attempt nothing varies."""
    streak = [
        failed_record("try-1", methods=["cache-blocking"], objective="peak-memory"),
        failed_record("try-2", methods=["cache-blocking"], objective="peak-memory", varied_from="try-1", varied="a"),
        failed_record("try-3", methods=["cache-blocking"], objective="peak-memory", varied_from="try-2", varied="b"),
    ]
    waiting = {"status": "not-tried", "evidence": None, "lesson": None, "next_action": None}
    records = [
        *streak,
        complete_record("holds", **waiting),
        complete_record("fails", **waiting),
        complete_record("no-verdict", **waiting),
        complete_record("never-run", **waiting),
        complete_record("named-db", varied_from="holds", varied="block backward dB", next_action="Keep it."),
        complete_record(
            "overruled",
            status="failed",
            plan={"worked_if": {"text": RULE, "tree": parse(RULE).model_dump(mode="json")}, "runs": 1},
            plan_decision={"status": "worked", "because": "worked-if holds", "runs": [], "readout": []},
            deviation="The run measured the wrong build.",
        ),
    ]
    write_registry(root, records)
    for attempt, db_share in (("holds", 0.5), ("fails", 0.2), ("no-verdict", 0.3)):
        cells = [
            step_cell("naive", "tiny", ms=10.0, shares=(0.3, 0.3, 0.3)),
            step_cell("numba", "tiny", ms=5.0, shares=(0.1, 0.2, db_share), vs_naive=2.0),
        ]
        add_run(root, step_results(attempt, RUN, cells))
    for attempt in ("holds", "fails"):
        verdict = Verdict(
            status="worked",
            lesson="dB bounds the step.",
            next_action="Block dB next.",
            evidence="numba at tiny, one run.",
            continue_if="amdahl(backward_db, backend=numba, config=tiny) >= 1.5",
        )
        conclude(root, attempt, verdict)
    return root


def _suggestions(root: Path) -> list[Suggestion]:
    with closing(open_index(root)) as index:
        return suggestions_of(index).suggestions


def test_each_kind_is_found_from_the_records_that_say_it(tmp_path: Path) -> None:
    found = _suggestions(_registry(tmp_path / "registry"))
    by_kind: dict[str, list[Suggestion]] = {}
    for s in found:
        by_kind.setdefault(s.kind, []).append(s)
    assert set(by_kind) == set(KINDS)
    [conclude_it] = by_kind["conclude"]
    assert conclude_it.attempts == ["no-verdict"] and conclude_it.runs == [f"no-verdict/{RUN}"]
    assert "no analysis plan, so its status is given by hand" in conclude_it.reason
    [overruled] = by_kind["deviation"]
    assert overruled.attempts == ["overruled"] and overruled.action == "ptreg show overruled"
    assert "recorded as failed, but its plan decided worked" in overruled.reason
    [run_it] = by_kind["run"]
    assert run_it.attempts == ["never-run"] and run_it.action == "ptreg gate never-run"  # no admission recorded
    [go] = by_kind["continue"]
    assert go.attempts == ["holds", "named-db"] and go.runs == [f"holds/{RUN}"]
    assert go.numbers == {"amdahl(backward_db, backend=numba, config=tiny)": 2.0}
    [stop] = by_kind["stopped"]
    assert stop.attempts == ["fails"] and "does not hold" in stop.reason
    [axis] = by_kind["change-axis"]
    assert axis.attempts == ["try-1", "try-2", "try-3"] and axis.numbers["negatives"] == 3
    assert "cache-blocking" not in axis.terms and "vectorization" in axis.terms
    assert "matmul-f32" not in axis.terms  # every base in use is already on the objective


def test_headroom_is_the_largest_recorded_bound_without_the_reference(tmp_path: Path) -> None:
    found = [s for s in _suggestions(_registry(tmp_path / "registry")) if s.kind == "headroom"]
    # largest bound first: holds (dB 50%, 2x), no-verdict (dB 30%), fails (dA and dB 20%: the tie goes to dA)
    assert [s.attempts[0] for s in found] == ["holds", "no-verdict", "fails"]
    assert "backward_da" in found[2].action
    holds = found[0]
    assert holds.numbers["amdahl_bound"] == 2.0 and "backward_db" in holds.action and "numba/tiny" in holds.action
    assert holds.attempts == ["holds", "named-db"]  # it names backward dB and varies it
    assert found[1].numbers["amdahl_bound"] == 1 / (1 - 0.3)  # naive's 0.3 each is not counted: it is the reference


def test_order_is_by_kind_then_stable_and_ranks_count_from_one(tmp_path: Path) -> None:
    root = _registry(tmp_path / "registry")
    first, again = _suggestions(root), _suggestions(root)
    assert first == again
    assert [s.rank for s in first] == list(range(1, len(first) + 1))
    kinds = [KINDS.index(s.kind) for s in first]
    assert kinds == sorted(kinds)
    opened = [s.attempts[0] for s in first if s.kind == "open-next-action"]
    with closing(open_index(root)) as index:
        newest_first = [a.id for a in reversed(in_ledger_order(index.summaries()))]
    # what is varied, or has a condition, is left out; the rest newest first
    assert opened == [i for i in newest_first if i in ("named-db", "try-3", "overruled")] and len(opened) == 3


def test_an_empty_registry_suggests_nothing(tmp_path: Path) -> None:
    assert _suggestions(write_registry(tmp_path / "registry", [])) == []


def test_a_run_that_cannot_be_read_is_passed_over(tmp_path: Path) -> None:
    root = _registry(tmp_path / "registry")
    for attempt in ("no-verdict", "holds"):
        (root / "runs" / attempt / RUN / "results.json").write_text("{", encoding="utf-8")
    with closing(open_index(root)) as index:
        answer = suggestions_of(index)
    assert [s.attempts[0] for s in answer.suggestions if s.kind == "headroom"] == ["fails"]
    assert "holds" not in [s.attempts[0] for s in answer.suggestions if s.kind == "continue"]
    assert len(answer.unreadable) == 2
    for why, attempt in zip(sorted(answer.unreadable), ("holds", "no-verdict"), strict=True):
        assert f"runs/{attempt}/{RUN}/results.json" in why and "\n" not in why


def test_a_condition_that_holds_is_suggested_without_the_answer_the_gate_would_not_ask(tmp_path: Path) -> None:
    from ptreg.gate.checks import PASSED, disposition_respected

    root = _registry(tmp_path / "registry")
    [go] = [s for s in _suggestions(root) if s.kind == "continue"]
    assert go.action.startswith("ptreg new --varied-from holds (its next action: ")
    assert "--answers-disposition" not in go.action
    # the gate's check, given what the suggestion says (no answer), passes on the condition that holds
    holds = read_attempt(root, "holds")
    proposal = holds.model_copy(update={"id": "next-one", "varied_from": "holds", "answers_disposition": None})
    decided = SimpleNamespace(truth=True, summary=lambda: "holds")
    assert disposition_respected(proposal, {"holds": holds}, decided).outcome == PASSED
