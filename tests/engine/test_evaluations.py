"""An evaluation tool's scores become items paired across arms, per task, with breadth across
tasks; a score that cannot be believed or paired is refused in one line. A workload whose tool is
not installed is listed as such and never run."""

from __future__ import annotations

import math
import sys
from pathlib import Path

import pytest

from ptreg.engine.plugins import PluginEntry
from ptreg.engine.workloads import discovery
from ptreg.engine.workloads.evaluations import (
    EvaluationError,
    SampleScore,
    arm_samples,
    breadth_name,
    metric_name,
    repeat_sample,
    unpaired,
)
from ptreg.errors import UnusableInput

sys.path.insert(0, str(Path(__file__).parent))


def scores(arm_offset: float, seed: int = 7) -> list[SampleScore]:
    found = [SampleScore("Arith-Easy", f"s{i}", "match", float((i + int(arm_offset)) % 2), seed) for i in range(4)]
    found += [SampleScore("spell", f"s{i}", "match", 1.0, seed) for i in range(2)]
    return found


def test_scores_become_items_per_task_with_breadth_and_usage() -> None:
    sample = repeat_sample(0, 7, scores(0), {"input_tokens": 120.0})
    assert sample.items == {
        "arith_easy__match": {"Arith-Easy/s0": 0.0, "Arith-Easy/s1": 1.0, "Arith-Easy/s2": 0.0, "Arith-Easy/s3": 1.0},
        "spell__match": {"spell/s0": 1.0, "spell/s1": 1.0},
    }
    # breadth is the macro mean: (0.5 + 1.0) / 2, each task once whatever its size (not 4/6)
    assert sample.values == {
        "arith_easy__match": 0.5,
        "spell__match": 1.0,
        "breadth__match": 0.75,
        "input_tokens": 120.0,
    }
    assert sample.seed == 7 and sample.repeat == 0


def test_one_task_has_no_breadth_and_each_seed_is_a_repeat() -> None:
    one = [s for s in scores(0) if s.task == "spell"] + [
        s.__class__(s.task, s.sample_id, s.metric, 0.0, 8) for s in scores(0) if s.task == "spell"
    ]
    found = arm_samples(one, [7, 8], {8: {"output_tokens": 3}})
    assert [(s.repeat, s.seed, s.values) for s in found] == [
        (0, 7, {"spell__match": 1.0}),
        (1, 8, {"spell__match": 0.0, "output_tokens": 3.0}),
    ]


@pytest.mark.parametrize("value", [math.nan, math.inf, -math.inf])
def test_a_score_that_is_not_finite_is_refused(value: float) -> None:
    with pytest.raises(
        EvaluationError, match=r"task 'spell', sample 's1', 'match', seed 7: score '-?(nan|inf)' is not a finite number"
    ):
        repeat_sample(0, 7, [*scores(0)[:-1], SampleScore("spell", "s1", "match", value, 7)])


def test_a_sample_scored_twice_is_refused() -> None:
    with pytest.raises(EvaluationError, match="task 'spell', sample 's1', 'match', seed 7: scored twice"):
        repeat_sample(0, 7, [*scores(0), SampleScore("spell", "s1", "match", 0.0, 7)])


def test_a_seed_without_scores_is_refused_not_zero() -> None:
    with pytest.raises(EvaluationError, match="seed 9: no sample was scored"):
        arm_samples(scores(0), [7, 9])


def test_a_sample_one_arm_scored_and_the_other_did_not_is_named() -> None:
    a = arm_samples(scores(0), [7])
    b = arm_samples(scores(1)[:-1], [7])
    assert unpaired({"a": a, "b": a}) is None
    assert unpaired({"a": a, "b": b}) == "seed 7, spell__match: arm 'a' scored 'spell/s1' and arm 'b' did not"
    assert unpaired({"b": b, "a": a}) == "seed 7, spell__match: arm 'a' scored 'spell/s1' and arm 'b' did not"


def test_names_are_metric_names_or_refused() -> None:
    assert metric_name("mmlu:abstract algebra", "acc,none") == "mmlu_abstract_algebra__acc_none"
    assert breadth_name("acc_norm") == "breadth__acc_norm"
    with pytest.raises(EvaluationError, match="is not a metric name"):
        metric_name("3digits", "match")
    with pytest.raises(EvaluationError, match="is not a metric name"):
        metric_name("t" * 70, "match")
    with pytest.raises(EvaluationError, match="a task named breadth"):
        metric_name("Breadth", "match")
    with pytest.raises(EvaluationError, match="an item id is 1 to 200 characters"):
        repeat_sample(0, 1, [SampleScore("t", "x" * 300, "m", 1.0, 1)])


def _entry(target: str) -> PluginEntry:
    return PluginEntry("fake", f"fake_workloads:{target}", discovery.ENTRY_POINT_GROUP, None, None)


def test_a_workload_whose_tool_is_missing_is_listed_as_not_installed_and_not_run(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    before = set(sys.modules)
    info = discovery.describe(_entry("NeedsAnExtra"))
    assert not info.available
    assert info.reason == "not installed: pip install 'ptreg[no-such-tool]'"
    assert "ptreg_no_such_tool" not in set(sys.modules) - before
    monkeypatch.setattr(discovery, "entries", lambda: {"fake": _entry("NeedsAnExtra")})
    discovery.workload_named.cache_clear()
    try:
        with pytest.raises(UnusableInput) as refused:
            discovery.workload_named("fake")
        assert (
            refused.value.message == "workload 'fake' is unavailable: not installed: pip install 'ptreg[no-such-tool]'"
        )
    finally:
        discovery.workload_named.cache_clear()


def test_requires_modules_of_the_wrong_shape_is_one_line() -> None:
    info = discovery.describe(_entry("BadRequires"))
    assert (
        not info.available
        and info.reason == "fake_workloads:BadRequires: requires_modules must be a tuple of module names"
    )
