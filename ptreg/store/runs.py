"""Run folders: ``runs/<attempt id>/<run id>/`` with ``results.json``, ``environment.json``
and what results.json keeps apart: ``items-1.jsonl``... for a run whose arms wrote per-item
results, ``samples-1.jsonl``... for one with too many samples.

No file of a run folder is larger than ``RUN_FILE_MAX_BYTES``, the bound a bundle holds each
run file to (``bundle.py``): one bound, so that every run ptreg writes can be exported. Per-item
results are what grows with an evaluation (80,000 items of 2 arms over 3 repeats made an
87 MB results.json before version 7), so they are always kept apart, as JSON lines of one arm,
repeat and metric each; where results.json would still pass the bound, the samples of every
cell go apart too, as lines of one cell and kind of sample. Both are split over as many files
as keep each under the bound; ``results.json`` names each with its sha256, and reading the run
puts them back where they belong, refusing a file changed since.

The folder is written under a hidden temporary name and renamed into place, so a reader sees
a whole run or none, and a run is never overwritten.
"""

from __future__ import annotations

import hashlib
import json
import math
import os
import re
import shutil
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from ..errors import CheckFailed, PtregError, UnusableInput
from ..records.problems import first_schema_error
from ..records.run_results import APART_FILE_PATTERN, MAX_APART_FILES, SAMPLE_FIELDS, RunResults
from ..text import json_type, shorten
from .faults import crash_point
from .jsonio import JsonError, dumps_pretty, fsync_directory, read_bytes, read_json, refuse_outside, stage_text
from .names import RUNNING_PREFIX
from .names import RUNS_DIR as RUNS_DIR

RESULTS_FILE = "results.json"
ENVIRONMENT_FILE = "environment.json"
STAGING_PREFIX = ".tmp-"  # a run folder being written; left over only by a killed process
# The most bytes of any file of a run folder, as written and as a bundle carries it.
RUN_FILE_MAX_BYTES = 16 * 1024 * 1024
APART_FILE = re.compile(APART_FILE_PATTERN)


def runs_dir(root: Path, attempt_id: str) -> Path:
    return root / RUNS_DIR / attempt_id


def run_folder(root: Path, attempt_id: str, run_id: str) -> Path:
    return runs_dir(root, attempt_id) / run_id


def new_run_id(root: Path, attempt_id: str, started: str) -> str:
    """``YYYYMMDDTHHMMSSZ`` of the start, with ``-2``, ``-3``... when that second is taken (by a
    run folder, or by the in-progress folder of a run not written yet)."""
    base = started.replace("-", "").replace(":", "")[:15] + "Z"
    candidate, n = base, 1
    while run_folder(root, attempt_id, candidate).exists() or os.path.lexists(
        runs_dir(root, attempt_id) / f"{RUNNING_PREFIX}{candidate}"
    ):
        n += 1
        candidate = f"{base}-{n}"
    return candidate


def run_texts(results: RunResults, environment: dict[str, Any]) -> dict[str, str]:
    """The files of a run folder, by name, each at most ``RUN_FILE_MAX_BYTES``: what is kept
    apart (every repeat's per-item results; the samples too when ``results.json`` would pass
    the bound with them), then ``results.json`` naming those files, then ``environment.json``."""
    raw = results.model_dump(mode="json")
    apart = _files("items", _item_lines(raw))
    if _size(_results_text(raw, apart)) > RUN_FILE_MAX_BYTES:
        apart = {**_files("samples", _sample_lines(raw)), **apart}
    texts = {**apart, RESULTS_FILE: _results_text(raw, apart), ENVIRONMENT_FILE: dumps_pretty(environment)}
    for name, text in texts.items():
        size = _size(text)
        if size > RUN_FILE_MAX_BYTES:  # only a run's summaries alone could: dozens of arms by dozens of metrics
            raise CheckFailed(
                f"the run's {name} would have {size} bytes, more than the {RUN_FILE_MAX_BYTES} a run file may have "
                "(the bound a bundle holds it to); nothing written"
            )
    return texts


def _size(text: str) -> int:
    return len(text.encode("utf-8"))


def _results_text(raw: dict[str, Any], apart: dict[str, str]) -> str:
    digests = {name: hashlib.sha256(text.encode("utf-8")).hexdigest() for name, text in apart.items()}
    return dumps_pretty({**raw, "kept_apart": digests} if digests else raw)


def _files(kind: str, lines: Iterator[str]) -> dict[str, str]:
    """The lines in files ``<kind>-1.jsonl``, ``<kind>-2.jsonl``... of at most
    ``RUN_FILE_MAX_BYTES`` each, in order."""
    files: list[list[str]] = []
    size = 0
    for line in lines:
        more = _size(line) + 1
        if not files or size + more > RUN_FILE_MAX_BYTES:
            files.append([])
            size = 0
        files[-1].append(line + "\n")
        size += more
    return {f"{kind}-{n}.jsonl": "".join(kept) for n, kept in enumerate(files, start=1)}


def _chunks(head: dict[str, Any], field: str, entries: list[tuple[str, Any]], as_list: bool) -> Iterator[str]:
    """``head`` with ``field`` holding the entries (as a list, or an object of key and value),
    over as many lines as keep each, with its newline, within ``RUN_FILE_MAX_BYTES``."""
    bare = _size(_line({**head, field: [] if as_list else {}}))
    room = RUN_FILE_MAX_BYTES - 1
    chunk: list[tuple[str, Any]] = []
    size = bare
    for key, value in entries:
        one = _size(_line([value] if as_list else {key: value})) - 1  # the entry and its comma, less the brackets
        if chunk and size + one > room:
            yield _line({**head, field: [v for _, v in chunk] if as_list else dict(chunk)})
            chunk, size = [], bare
        chunk.append((key, value))
        size += one
    yield _line({**head, field: [v for _, v in chunk] if as_list else dict(chunk)})


def _item_lines(raw: dict[str, Any]) -> Iterator[str]:
    """Each repeat's per-item results, taken out of ``raw``, as JSON lines of one arm, repeat
    and metric (a long list over several lines)."""
    for cell in raw["cells"]:
        for sample in cell.get("metric_samples") or ():
            for metric, by_item in (sample.pop("items", None) or {}).items():
                head = {"arm": cell["backend"], "repeat": sample["repeat"], "metric": metric}
                yield from _chunks(head, "items", list(by_item.items()), as_list=False)


def _sample_lines(raw: dict[str, Any]) -> Iterator[str]:
    """Each cell's samples, taken out of ``raw``, as JSON lines of one cell (by its place in
    ``cells``) and one kind of sample, in order (a long list over several lines)."""
    for index, cell in enumerate(raw["cells"]):
        for field in SAMPLE_FIELDS:
            samples = cell.pop(field, None)
            if samples is not None:
                yield from _chunks({"cell": index, "field": field}, "samples", [("", s) for s in samples], as_list=True)


def _finite(value: Any) -> bool:
    if isinstance(value, bool) or not isinstance(value, int | float):
        return False
    try:
        return math.isfinite(value)
    except OverflowError:  # an integer of hundreds of digits
        return False


def _line(value: Any) -> str:
    return json.dumps(value, separators=(",", ":"), ensure_ascii=False, allow_nan=False)


def write_run(root: Path, results: RunResults, environment: dict[str, Any]) -> Path:
    """Write the run folder whole: every file in a hidden temporary folder, then one rename."""
    assert results.attempt is not None and results.run_id is not None
    texts = run_texts(results, environment)
    parent = runs_dir(root, results.attempt)
    refuse_outside(root, parent, "the run is not written there")
    parent.mkdir(parents=True, exist_ok=True)
    final = parent / results.run_id
    staging = parent / f"{STAGING_PREFIX}{results.run_id}-{os.getpid()}"
    staging.mkdir()
    try:
        for name, text in texts.items():
            staged = stage_text(staging, text, prefix=f".{name}.")
            os.replace(staged, staging / name)
            crash_point()
        fsync_directory(staging)
        os.rename(staging, final)  # fails if the folder exists: a run is never overwritten
        crash_point()  # the folder is in place; the attempt does not point to it yet
    except BaseException:
        shutil.rmtree(staging, ignore_errors=True)
        raise
    fsync_directory(parent)
    return final


def read_results(folder: Path, root: Path | None = None) -> RunResults:
    """The run's results, what it keeps apart put back; with ``root``, refused when a symlink
    leads a file of it out of the registry."""
    path = folder / RESULTS_FILE
    if root is not None:  # a symlinked run folder (or file) could make any file pass for the results
        refuse_outside(root, path)
    raw = read_json(path)

    def apart_file(name: str) -> bytes:
        apart = folder / name
        if root is not None:
            refuse_outside(root, apart)
        return read_bytes(apart, RUN_FILE_MAX_BYTES, follow=False)

    return parse_results(raw, str(path), str(folder), apart_file)


def apart_files_in(folder: Path) -> list[str]:
    """The names of the files a run folder keeps apart from its results.json, unread."""
    try:
        with os.scandir(folder) as entries:
            return sorted(e.name for e in entries if APART_FILE.fullmatch(e.name))
    except OSError:
        return []


def apart_file_names(raw: Any, where: str) -> list[str]:
    """The files a results.json names as kept apart, each checked to be one such name (never a
    path) before anything is read by it: the samples first, then the items, each in order."""
    named = raw.get("kept_apart") if isinstance(raw, dict) else None
    if named is None:
        return []
    if not isinstance(named, dict) or len(named) > MAX_APART_FILES:
        raise UnusableInput(f"{where}#/kept_apart: a mapping of at most {MAX_APART_FILES} file names to sha256 digests")
    odd = next((n for n in named if not APART_FILE.fullmatch(n)), None)
    if odd is not None:
        raise UnusableInput(f"{where}#/kept_apart: {shorten(odd)} is not the name of a file a run keeps apart")
    return sorted(named, key=lambda n: (not n.startswith("samples-"), int(n.split("-")[1].split(".")[0])))


def parse_results(raw: Any, where: str, folder: str, apart_file: Callable[[str], bytes]) -> RunResults:
    """A run's results from its results.json (``raw``, read from ``where``) and the files it
    keeps apart, which ``apart_file`` gives by name from the run's ``folder``; unusable input,
    naming the file and line, for anything that is not what ptreg wrote."""
    if not isinstance(raw, dict):
        raise UnusableInput(f"{where}: expected a JSON object, got {json_type(raw)}")
    put_back = _PutBack(raw)
    for name in apart_file_names(raw, where):
        here = f"{folder}/{name}"
        try:
            data = apart_file(name)
        except JsonError as exc:
            raise UnusableInput(f"{here}: {exc.problem}") from None
        recorded = raw["kept_apart"][name]
        found = hashlib.sha256(data).hexdigest()
        if found != recorded:
            raise UnusableInput(
                f"{here}: its sha256 is {found[:12]}, not the {shorten(str(recorded), 20)} {RESULTS_FILE} records "
                "(changed after the run?)"
            )
        put_back.lines(data, here, name.startswith("samples-"))
    try:
        return RunResults.model_validate(raw)
    except ValidationError as exc:
        raise UnusableInput(first_schema_error(exc, where)) from None


class _PutBack:
    """Puts the lines of the files a run keeps apart back where they came from in ``raw``."""

    def __init__(self, raw: dict[str, Any]):
        cells = raw.get("cells")
        self.cells: list[Any] = cells if isinstance(cells, list) else []
        self.filled: set[tuple[int, str]] = set()  # the lists these lines made
        self.samples: dict[tuple[Any, Any], dict[str, Any]] | None = None  # by (arm, repeat), once items come

    def lines(self, data: bytes, where: str, samples: bool) -> None:
        try:
            text = data.decode("utf-8")
        except UnicodeDecodeError as exc:
            raise UnusableInput(f"{where}: not UTF-8 (byte {exc.start})") from None
        for number, line in enumerate(text.splitlines(), start=1):
            at = f"{where}: line {number}"
            try:
                value = json.loads(line)
            except (ValueError, RecursionError):
                raise UnusableInput(f"{at} is not JSON") from None
            (self._samples if samples else self._items)(value, at)

    def _samples(self, value: Any, at: str) -> None:
        if not isinstance(value, dict) or set(value) != {"cell", "field", "samples"}:
            raise UnusableInput(f"{at}: not an object of cell, field and samples")
        index, field, samples = value["cell"], value["field"], value["samples"]
        if type(index) is not int or not 0 <= index < len(self.cells) or not isinstance(self.cells[index], dict):
            raise UnusableInput(f"{at}: cell {shorten(index)} is none of the {len(self.cells)} of {RESULTS_FILE}")
        if field not in SAMPLE_FIELDS or not isinstance(samples, list):
            raise UnusableInput(f"{at}: field must be one of {', '.join(SAMPLE_FIELDS)} and samples a list")
        cell = self.cells[index]
        if (index, field) not in self.filled:
            if cell.get(field) is not None:
                raise UnusableInput(f"{at}: {RESULTS_FILE} holds cell {index}'s {field} itself")
            cell[field] = []
            self.filled.add((index, field))
        cell[field].extend(samples)

    def _items(self, value: Any, at: str) -> None:
        if not isinstance(value, dict) or set(value) != {"arm", "repeat", "metric", "items"}:
            raise UnusableInput(f"{at}: not an object of arm, repeat, metric and items")
        if self.samples is None:
            self.samples = {}
            for cell in self.cells:
                for sample in (cell.get("metric_samples") if isinstance(cell, dict) else None) or ():
                    if isinstance(sample, dict) and type(sample.get("repeat")) is int:
                        self.samples.setdefault((cell.get("backend"), sample["repeat"]), sample)
        arm, repeat, metric, items = value["arm"], value["repeat"], value["metric"], value["items"]
        sample = self.samples.get((arm, repeat)) if isinstance(arm, str) and type(repeat) is int else None
        if sample is None:
            raise UnusableInput(f"{at}: names arm {shorten(arm)} repeat {shorten(repeat)}, which {RESULTS_FILE} lacks")
        if not isinstance(metric, str) or not isinstance(items, dict):
            raise UnusableInput(f"{at}: metric must be a name and items an object")
        kept = sample.setdefault("items", {})
        by_item = kept.setdefault(metric, {}) if isinstance(kept, dict) else None
        if not isinstance(by_item, dict):
            raise UnusableInput(f"{at}: arm {shorten(arm)} repeat {repeat} holds items of another form")
        odd = next((item for item, v in items.items() if not _finite(v)), None)
        if odd is not None:
            raise UnusableInput(f"{at}: {shorten(metric)} of item {shorten(odd)} is not a finite number")
        twice = next((item for item in items if item in by_item), None)
        if twice is not None:
            raise UnusableInput(f"{at}: item {shorten(twice)} of {shorten(metric)} is there a second time")
        by_item.update(items)


def read_environment(root: Path, folder: Path) -> dict[str, Any]:
    """The run's environment.json, refused when it is not a JSON object inside the registry."""
    path = folder / ENVIRONMENT_FILE
    refuse_outside(root, path)
    environment = read_json(path)
    if not isinstance(environment, dict):
        raise UnusableInput(f"{path}: expected a JSON object, got {json_type(environment)}")
    return environment


def check_folder(root: Path, attempt_id: str, run_id: str) -> str | None:
    """Why the run folder an attempt links to is unusable, or None when it is whole."""
    folder = run_folder(root, attempt_id, run_id)
    if not folder.is_dir():
        return f"run folder {folder} does not exist"
    try:
        results = read_results(folder, root)
        read_environment(root, folder)
    except PtregError as exc:
        return exc.message
    if results.run_id != run_id or results.attempt != attempt_id:
        return (
            f"{folder / RESULTS_FILE}: names run {results.run_id!r} of {results.attempt!r}, "
            f"not {run_id!r} of {attempt_id!r}"
        )
    return None
