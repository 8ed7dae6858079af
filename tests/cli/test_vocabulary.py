"""`ptreg vocab add` takes slugs only, as every other term is one, and `ptreg vocab remove`
retires a term no record uses; each refusal is one line and leaves the registry as it was."""

from __future__ import annotations

from pathlib import Path

import pytest

from helpers import assert_one_line_error, complete_record, snapshot, vocabulary_of, write_registry


@pytest.fixture
def root(tmp_path: Path) -> Path:
    return write_registry(tmp_path / "reg", [complete_record("a"), complete_record("b")])


def methods(root: Path) -> dict[str, str | None]:
    return vocabulary_of(root, "method")


@pytest.mark.parametrize("term", ["Bad Term", "bad_term", "bad/term", "Loop-Tiling"])
def test_a_term_that_is_not_a_slug_is_refused_with_the_slug_meant(cli, root: Path, term: str) -> None:
    before = snapshot(root)
    result = cli("-r", root, "vocab", "add", "method", term, "--description", "A term.")
    assert_one_line_error(result, 2, repr(term), "a term is a slug")
    assert snapshot(root) == before
    if term == "Bad Term":
        assert "'bad-term'" in result.err


def test_a_term_no_record_uses_is_retired(cli, root: Path) -> None:
    assert cli("-r", root, "vocab", "add", "method", "loop-tiling", "--description", "Tile by hand.").code == 0
    assert "loop-tiling" in methods(root)
    done = cli("-r", root, "vocab", "remove", "method", "loop-tiling")
    assert done.code == 0, done.err
    assert "removed 'loop-tiling'" in done.out and "loop-tiling" not in methods(root)
    assert "loop-tiling" not in cli("-r", root, "vocab", "list", "method").out


def test_a_term_in_use_or_unknown_or_fixed_is_not_removed(cli, root: Path) -> None:
    before = snapshot(root)
    in_use = cli("-r", root, "vocab", "remove", "method", "cache-blocking")
    assert_one_line_error(in_use, 1, "'cache-blocking' is in use by a, b")
    assert_one_line_error(
        cli("-r", root, "vocab", "remove", "method", "cache-blockin"), 2, "did you mean: cache-blocking"
    )
    assert_one_line_error(cli("-r", root, "vocab", "remove", "confidence", "exact"), 2, "fixed by the record format")
    assert snapshot(root) == before


def test_a_record_that_cannot_be_read_keeps_every_term(cli, root: Path) -> None:
    assert cli("-r", root, "vocab", "add", "method", "loop-tiling", "--description", "Tile by hand.").code == 0
    (root / "broken.json").write_text("{")
    before = snapshot(root)
    assert_one_line_error(cli("-r", root, "vocab", "remove", "method", "loop-tiling"), 1, "cannot be read")
    assert snapshot(root) == before
