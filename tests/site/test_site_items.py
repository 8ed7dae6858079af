"""The run's page lists the items each arm lost (and, folded, those it won), per metric, with the
counts `ptreg items` and `show` give; item ids a harness wrote stay text."""

from __future__ import annotations

import re
from collections.abc import Callable
from pathlib import Path

import pytest
from item_runs import RUN, arms_run, registry, seeds

from helpers import Result, snapshot

pytest.importorskip("jinja2", reason="the site extra is not installed")


def _page(cli: Callable[..., Result], root: Path, out: Path) -> str:
    built = cli("--registry", root, "site", "-o", out, "--json")
    assert built.code == 0 and "Traceback" not in built.err, built.err
    return (out / "runs" / "graded" / f"{RUN}.html").read_text(encoding="utf-8")


def _section(page: str, arm: str) -> str:
    found = re.search(rf'<div class="item-list" data-metric="score" data-arm="{arm}".*?\n</div>\n', page, re.S)
    assert found is not None, page
    return found.group(0)


def test_the_run_page_lists_the_lost_items_worst_first_and_folds_the_won(cli, tmp_path: Path) -> None:
    root = registry(tmp_path)
    before = snapshot(root)
    page = _page(cli, root, tmp_path / "out")
    assert "<h2>Items lost and won</h2>" in page
    challenger = _section(page, "challenger")
    assert "1 won, 2 lost, 2 tied of 5 items (score, challenger over champion, 3 seeds)" in challenger
    lost = challenger[challenger.index('data-verdict="lost"') : challenger.index("<details>")]
    assert re.findall(r"<tr><td>(q\d)</td>", lost) == ["q1", "q2"]
    assert "<tr><td>q1</td><td>1</td><td>0</td><td>-1</td><td>lost</td></tr>" in lost
    won = challenger[challenger.index("<details>") :]
    assert "<summary>1 won by challenger</summary>" in won and re.findall(r"<tr><td>(q\d)</td>", won) == ["q3"]
    third = _section(page, "third")
    assert "0 won, 1 lost, 4 tied" in third and "<details>" not in third  # nothing won: nothing folded
    listed = cli("-r", root, "items", "graded", "--json").json()["metrics"]
    assert [(m["arm"], m["won"], m["lost"], m["tied"]) for m in listed] == [("challenger", 1, 2, 2), ("third", 0, 1, 4)]
    assert snapshot(root) == before


def test_a_run_without_items_has_no_such_section_and_a_hostile_item_id_stays_text(cli, tmp_path: Path) -> None:
    plain = registry(tmp_path / "plain", arms_run({arm: [{}, {}] for arm in ("champion", "challenger", "third")}))
    assert "Items lost and won" not in _page(cli, plain, tmp_path / "plain-out")
    evil = '<script>alert(1)</script>"'
    hostile = arms_run(
        {
            "champion": seeds({evil: 1, "q": 0}, {evil: 1, "q": 0}),
            "challenger": seeds({evil: 0, "q": 0}, {evil: 0, "q": 0}),
            "third": seeds({evil: 1, "q": 0}, {evil: 1, "q": 0}),
        }
    )
    page = _page(cli, registry(tmp_path / "hostile", hostile), tmp_path / "hostile-out")
    assert "<script>alert" not in page and "<td>&lt;script&gt;alert(1)&lt;/script&gt;&#34;</td>" in page
