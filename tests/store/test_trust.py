"""The consent file (trusted-evaluators.json) is hostile like every file ptreg reads: one short
line for anything but a ptreg trust file, never trust in nothing or in everything."""

from __future__ import annotations

import json
import os

import pytest

from ptreg.errors import PtregError
from ptreg.store import trust

DIGEST = "ab" * 32


@pytest.mark.parametrize(
    ("content", "problem"),
    [
        (
            {"format": "ptreg-trust", "sha256": ["a" * 10_000_000]},
            r"sha256 holds 'aaaa.*\.\.\. \(10000000 characters\)",
        ),
        ({"format": "ptreg-trust", "sha256": ["\x1b]0;t\x07"]}, r"sha256 holds '\\x1b\]0;t\\x07', not a sha256"),
        ({"format": "ptreg-trust", "sha256": DIGEST}, "not a ptreg trust file"),
        ({"format": "other", "sha256": [DIGEST]}, "not a ptreg trust file"),
    ],
)
def test_a_damaged_consent_file_is_one_short_line(content: object, problem: str) -> None:
    trust.config_dir().mkdir(parents=True)
    trust.trust_file().write_text(json.dumps(content), encoding="utf-8")
    with pytest.raises(PtregError, match=problem) as caught:
        trust.trusted()
    assert len(caught.value.message) < 500 and caught.value.message.isprintable()


def test_a_consent_file_that_is_a_link_or_a_folder_is_refused_untouched(tmp_path) -> None:
    trust.config_dir().mkdir(parents=True)
    victim = tmp_path / "victim.json"
    victim.write_text(json.dumps({"format": "ptreg-trust", "sha256": [DIGEST]}), encoding="utf-8")
    trust.trust_file().symlink_to(victim)
    with pytest.raises(PtregError, match="is a symlink"):
        trust.is_trusted(DIGEST)
    with pytest.raises(PtregError, match="is a symlink"):
        trust.trust("cd" * 32)
    assert json.loads(victim.read_text(encoding="utf-8"))["sha256"] == [DIGEST]
    trust.trust_file().unlink()
    os.mkfifo(trust.trust_file())
    with pytest.raises(PtregError, match="not a regular file"):
        trust.trusted()
