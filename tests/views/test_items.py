"""`ptreg items`: the items behind `show`'s won/lost/tied, on runs whose items are known: exactly
which are lost, in which order, with the same counts the run records; the command's filters,
JSON and errors."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from item_runs import CHALLENGER, CHAMPION, RUN, THIRD, arms_run, known, registry, seeds

from helpers import assert_one_line_error, snapshot
from ptreg.errors import UnusableInput
from ptreg.views.items import items_of, run_items


def test_the_lost_items_are_exactly_those_lost_worst_first_and_agree_with_the_counts() -> None:
    found = items_of(known(), arm="challenger")
    assert [(m.metric, m.arm, m.over) for m in found] == [("score", "challenger", "champion")]
    listed = found[0]
    assert [r.item for r in listed.shown(["lost"])] == ["q1", "q2"]  # -1 before -1/3
    assert [r.item for r in listed.shown(["won"])] == ["q3"]
    assert [r.item for r in listed.shown(["tied"])] == ["q4", "q5"]
    assert [r.item for r in listed.rows] == ["q1", "q2", "q4", "q5", "q3"]  # every item, worst loss first
    q2 = listed.rows[1]
    assert (q2.over_value, q2.arm_value, q2.difference) == (1.0, pytest.approx(2 / 3), pytest.approx(-1 / 3))
    recorded = (known().cells[1].versus or {})["champion"]["score"]
    assert listed.counts == (recorded.won, recorded.lost, recorded.tied) == (1, 2, 2)
    assert listed.agrees and listed.recorded == (1, 2, 2)
    assert listed.summary() == "1 won, 2 lost, 2 tied of 5 items (score, challenger over champion, 3 seeds)"


def test_by_default_every_other_arm_over_the_baseline_and_a_lower_metric_the_other_way() -> None:
    loss = arms_run(
        {
            "champion": seeds({"a": 1.0, "b": 2.0}, {"a": 1.0, "b": 2.0}, metric="loss"),
            "challenger": seeds({"a": 1.5, "b": 1.0}, {"a": 1.5, "b": 1.0}, metric="loss"),
            "third": seeds({"a": 1.0, "b": 2.0}, {"a": 1.0, "b": 2.0}, metric="loss"),
        }
    )
    found = items_of(loss)
    assert [(m.metric, m.arm) for m in found] == [("loss", "challenger"), ("loss", "third")]
    assert [(r.item, r.verdict) for r in found[0].rows] == [("a", "lost"), ("b", "won")]  # a higher loss loses
    assert [r.verdict for r in found[1].rows] == ["tied", "tied"]
    over_third = items_of(known(), arm="challenger", over="third")[0]
    assert [r.item for r in over_third.shown(["won"])] == ["q3", "q5"] and over_third.over == "third"


def test_items_left_out_of_a_seed_are_counted_never_filled_in() -> None:
    gappy = arms_run(
        {
            "champion": seeds({"q1": 1, "q2": 1}, {"q1": 1}),
            "challenger": seeds({"q1": 0, "q2": 0}, {"q1": 0, "q2": 0}),
            "third": seeds({"q1": 1, "q2": 1}, {"q1": 1, "q2": 1}),
        }
    )
    listed = items_of(gappy, arm="challenger")[0]
    assert [r.item for r in listed.rows] == ["q1"] and listed.left_out == 1
    assert "1 item left out, missing from a seed" in listed.summary()


def test_a_run_recorded_before_version_8_pairs_its_items_as_it_was_recorded() -> None:
    old = arms_run({"champion": seeds(*CHAMPION), "challenger": seeds(*CHALLENGER), "third": seeds(*THIRD)}, version=7)
    listed = items_of(old, arm="challenger")[0]
    recorded = (old.cells[1].versus or {})["champion"]["score"]
    assert listed.counts == (recorded.won, recorded.lost, recorded.tied) and listed.left_out is None
    assert [r.item for r in listed.shown(["lost"])] == ["q1", "q2"]


def test_counts_a_results_file_was_edited_to_say_are_not_believed() -> None:
    forged = known()
    (forged.cells[1].versus or {})["champion"]["score"].lost = 0
    listed = items_of(forged, arm="challenger")[0]
    assert listed.counts == (1, 2, 2) and not listed.agrees
    assert "record 1/0/2 won/lost/tied, but its items give 1/2/2" in (listed.disagreement() or "")


@pytest.mark.parametrize(
    ("asked", "fragment"),
    [
        ({"arm": "nobody"}, "has no arm 'nobody' (its arms: champion, challenger, third)"),
        ({"over": "nobody"}, "has no arm 'nobody'"),
        ({"arm": "champion"}, "--arm and --over both name champion"),
        ({"metric": "accuracy"}, "records no metric 'accuracy' (its metrics: "),
        ({"metric": "latency_ms"}, "latency_ms is compared as a ratio"),
        ({"metric": "loss"}, "has no per-item results for loss"),
    ],
)
def test_what_cannot_be_listed_is_refused_naming_it(asked: dict[str, Any], fragment: str) -> None:
    with pytest.raises(UnusableInput) as refused:
        items_of(known(), **asked)
    assert fragment in refused.value.message


def test_a_run_without_items_says_so() -> None:
    plain = arms_run({arm: [{}, {}] for arm in ("champion", "challenger", "third")})
    with pytest.raises(UnusableInput) as refused:
        items_of(plain)
    assert "has no per-item results (challenger, third over champion): its arms wrote no per-item results" in (
        refused.value.message
    )


# --------------------------------------------------------------------------- the command


def test_the_command_lists_the_lost_items_in_a_table_and_the_counts_in_a_line(tmp_path: Path, cli) -> None:
    root = registry(tmp_path)
    done = cli("-r", root, "items", "graded", "--arm", "challenger", "--lost")
    assert done.code == 0, done.err
    lines = done.out.splitlines()
    assert lines[0] == f"graded/{RUN}: score (fraction, higher is better), challenger over champion"
    assert lines[1].split() == ["item", "champion", "challenger", "difference", "verdict"]
    assert [line.split()[0] for line in lines[3:5]] == ["q1", "q2"] and len(lines) == 6
    assert lines[3].split() == ["q1", "1", "0", "-1", "lost"]
    assert lines[5] == "1 won, 2 lost, 2 tied of 5 items (score, challenger over champion, 3 seeds)"
    both = cli("-r", root, "items", f"graded/{RUN}", "--arm", "challenger", "--won", "--tied", "--limit", "2")
    assert [line.split()[0] for line in both.out.splitlines()[3:5]] == ["q4", "q5"]
    assert "... and 1 more (--limit 2)" in both.out


def test_the_command_answers_json_for_scripts(tmp_path: Path, cli) -> None:
    root = registry(tmp_path)
    found = cli("-r", root, "items", "graded", "--lost", "--json").json()
    assert (found["attempt"], found["run_id"], found["verdicts"]) == ("graded", RUN, ["lost"])
    challenger, third = found["metrics"]
    assert [i["item"] for i in challenger["items"]] == ["q1", "q2"]
    assert (challenger["won"], challenger["lost"], challenger["tied"]) == (1, 2, 2)
    assert challenger["recorded"] == {"won": 1, "lost": 2, "tied": 2}
    assert challenger["items"][0] == {
        "item": "q1",
        "over_value": 1.0,
        "arm_value": 0.0,
        "difference": -1.0,
        "verdict": "lost",
    }
    assert [i["item"] for i in third["items"]] == ["q5"] and third["arm"] == "third"
    limited = cli("-r", root, "items", "graded", "--arm", "third", "--limit", "1", "--json").json()
    assert len(limited["metrics"][0]["items"]) == 1 and limited["metrics"][0]["not_shown"] == 4


def test_a_table_fits_the_terminal_where_an_item_id_is_long(tmp_path: Path, cli, monkeypatch) -> None:
    long_id = "what-is-the-capital-of-a-country-whose-name-is-long-enough-to-wrap" * 2
    wide = arms_run(
        {
            "champion": seeds({long_id: 1, "q": 0}, {long_id: 1, "q": 0}),
            "challenger": seeds({long_id: 0, "q": 0}, {long_id: 0, "q": 0}),
            "third": seeds({long_id: 1, "q": 0}, {long_id: 1, "q": 0}),
        }
    )
    root = registry(tmp_path, wide)
    monkeypatch.setenv("COLUMNS", "80")
    done = cli("-r", root, "items", "graded", "--arm", "challenger")
    assert done.code == 0 and max(map(len, done.out.splitlines())) <= 80
    assert "lost" in done.out and "…" in done.out  # the id is cut, the verdict never


@pytest.mark.parametrize(
    ("args", "fragment"),
    [
        (["nothing"], "no run 'nothing'"),
        (["graded/20990101T000000Z"], "no run 'graded/20990101T000000Z'"),
        (["graded", "--arm", "nobody"], "has no arm 'nobody'"),
        (["graded", "--metric", "accuracy"], "records no metric 'accuracy'"),
    ],
)
def test_the_command_refuses_in_one_line_and_writes_nothing(
    tmp_path: Path, cli, args: list[str], fragment: str
) -> None:
    root = registry(tmp_path)
    before = snapshot(root)
    assert_one_line_error(cli("-r", root, "items", *args), 2, fragment)
    assert snapshot(root) == before


def test_the_command_says_a_run_has_no_items(tmp_path: Path, cli) -> None:
    root = registry(tmp_path, arms_run({arm: [{}, {}] for arm in ("champion", "challenger", "third")}))
    assert_one_line_error(cli("-r", root, "items", "graded"), 2, "has no per-item results", "PTREG_ITEMS")


def test_the_view_finds_runs_as_compare_names_them(tmp_path: Path) -> None:
    root = registry(tmp_path)
    assert run_items(root, "graded").label == run_items(root, f"graded/{RUN}").label == f"graded/{RUN}"


def test_help_says_what_is_counted(cli) -> None:
    shown = " ".join(cli("items", "--help").out.split())
    for words in ("won/lost/tied", "averaged over the seeds", "--lost", "--over", "PTREG_ITEMS"):
        assert words in shown


def test_an_item_id_a_harness_wrote_is_shown_never_acted_on(tmp_path: Path, cli) -> None:
    evil = "q\x1b]0;pwned\x07\u202e"
    hostile = arms_run(
        {
            "champion": seeds({evil: 1, "q": 0}, {evil: 1, "q": 0}),
            "challenger": seeds({evil: 0, "q": 0}, {evil: 0, "q": 0}),
            "third": seeds({evil: 1, "q": 0}, {evil: 1, "q": 0}),
        }
    )
    root = registry(tmp_path, hostile)
    shown = cli("-r", root, "items", "graded", "--arm", "challenger", "--lost")
    assert shown.code == 0 and "\x1b" not in shown.out and "\u202e" not in shown.out
    assert "q\\x1b]0;pwned\\x07\\u202e" in shown.out
    scripted = cli("-r", root, "items", "graded", "--arm", "challenger", "--lost", "--json")
    assert "\x1b" not in scripted.out and "\u202e" not in scripted.out
    assert scripted.json()["metrics"][0]["items"][0]["item"] == evil  # the same value, read back


def test_the_command_warns_where_the_recorded_counts_are_not_its_items(tmp_path: Path, cli) -> None:
    forged = known()
    (forged.cells[1].versus or {})["champion"]["score"].lost = 0
    done = cli("-r", registry(tmp_path, forged), "items", "graded", "--arm", "challenger", "--lost")
    assert done.code == 0 and [line.split()[0] for line in done.out.splitlines()[3:5]] == ["q1", "q2"]
    assert done.err.startswith("ptreg: warning: graded/20261201T000000Z: score: the run's results record 1/0/2")
    assert len(done.err.strip().splitlines()) == 1
