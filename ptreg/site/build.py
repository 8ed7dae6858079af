"""Building the site: plan every page with the registry files it depends on, render the pages
whose inputs changed (all of them without ``changed``), write each one atomically, remove the
pages of what is gone, and write the manifest last.

The manifest (``.ptreg-site.json``) marks a directory as a site ptreg built, so a rebuild may
replace its files while any other non-empty directory is refused; it keeps each page's input
digest, and what each record said about evaluators and runs when it was last read, so that
``--changed`` reads and renders only what moved (docs/site.md says which page depends on what).
"""

from __future__ import annotations

import hashlib
import importlib.util
import os
import stat
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from importlib import resources
from pathlib import Path
from typing import TYPE_CHECKING, Any

from .. import __version__
from ..errors import PtregError, UnusableInput
from ..store.evaluator_files import EVALUATORS_DIR
from ..store.jsonio import atomic_write_text, decode_json, dumps_pretty, replace_text_unsynced, sync_everything
from ..store.outputs import leads_into
from ..store.workfiles import ForeignFile, check_working_file, inside, read_working_file
from ..text import shorten
from ..views.comparison import runs_read_once
from .pages import (
    INDEX,
    dossier_context,
    dossier_path,
    evaluator_context,
    evaluator_path,
    index_context,
    is_page_path,
    lineage_context,
    lineage_path,
    run_context,
    run_path,
)
from .sources import Inputs

if TYPE_CHECKING:
    from jinja2 import Environment

    from ..store.reader import RegistryReader

MANIFEST = ".ptreg-site.json"
FORMAT = "ptreg-site"
FORMAT_VERSION = 1
STATIC = ("site.css", "site.js")
EXTRA_HINT = "ptreg site needs Jinja2 and matplotlib, the site extra: pip install 'ptreg[site]'"


def require_extra() -> None:
    """One line saying how to install what the site needs, when it is missing."""
    for module in ("jinja2", "matplotlib"):
        try:
            found = importlib.util.find_spec(module) is not None
        except ValueError:  # already imported, or set to None in sys.modules: unusable
            found = sys.modules.get(module) is not None
        if not found:
            raise UnusableInput(f"{EXTRA_HINT} ({module} is not installed)")


@dataclass
class Report:
    output: Path
    pages: int = 0
    rendered: int = 0
    written: int = 0
    skipped: int = 0
    removed: int = 0
    broken_records: int = 0
    broken_runs: int = 0
    seconds: float = 0.0
    changed_only: bool = False

    def to_json(self) -> dict[str, Any]:
        return {
            "output": str(self.output),
            "pages": self.pages,
            "rendered": self.rendered,
            "written": self.written,
            "skipped": self.skipped,
            "removed": self.removed,
            "broken_records": self.broken_records,
            "broken_runs": self.broken_runs,
            "changed_only": self.changed_only,
            "seconds": round(self.seconds, 3),
        }


@dataclass
class Planned:
    path: str
    kind: str
    key: str
    inputs: list[str]
    digest: str = ""


@dataclass
class Uses:
    """What one record says about evaluators and runs, as of its file's hash."""

    sha: str
    evaluator: str | None
    runs: dict[str, str | None] = field(default_factory=dict)  # run id -> its evaluator

    def to_json(self) -> dict[str, Any]:
        return {"sha": self.sha, "evaluator": self.evaluator, "runs": self.runs}


# A manifest ptreg writes holds a few hundred bytes per page; anything near this is not one.
MANIFEST_MAX_BYTES = 256 * 1024 * 1024


def read_manifest(out: Path) -> tuple[dict[str, Any] | None, str | None]:
    """(the manifest of a previous site in ``out``, None) when it is one ptreg wrote; (None,
    why not) when its name holds anything else, or a manifest that names a page ptreg never
    writes (such a directory is treated as foreign: nothing it lists is removed); (None, None)
    when there is none."""
    path = out / MANIFEST
    try:
        data = read_working_file(path, MANIFEST_MAX_BYTES)
    except ForeignFile as exc:
        return None, f"its {MANIFEST} {exc.problem}"
    if data is None:
        return None, None
    try:
        raw = decode_json(data, str(path))
    except PtregError as exc:
        return None, f"its {MANIFEST} is not JSON ptreg wrote ({exc.message.removeprefix(f'{path}: ')})"
    if not isinstance(raw, dict) or raw.get("format") != FORMAT or not isinstance(raw.get("pages"), dict):
        return None, f"its {MANIFEST} is not a manifest of format {FORMAT!r}"
    for key in (*raw["pages"], *(raw.get("broken_runs") or {})):
        if not is_page_path(key):
            return None, f"its {MANIFEST} names {shorten(key)}, not a page ptreg writes"
    if not isinstance(raw.get("broken_runs", {}), dict) or not isinstance(raw.get("records", {}), dict):
        return None, f"its {MANIFEST} is not a manifest ptreg wrote"
    return raw, None


def check_output(out: Path, force: bool, registry: Path) -> dict[str, Any] | None:
    """The previous site's manifest; refuses a directory that holds anything else, unless forced,
    and, forced or not, one that holds the registry or lies inside it (the site's own folders,
    attempts/ and runs/, would land among the records). A forced build into a directory whose
    manifest is not ptreg's removes nothing: only the pages of a manifest ptreg wrote are removed."""
    if leads_into(out, registry) or leads_into(registry, out):
        raise UnusableInput(
            f"{out}: holds the registry {registry} or lies inside it; give an output directory beside it",
        )
    if out.exists() and not out.is_dir():
        raise UnusableInput(f"{out}: exists and is not a directory; give another --output")
    manifest, foreign = read_manifest(out) if out.is_dir() else (None, None)
    if manifest is None and out.is_dir() and any(not _own_ignore_file(p) for p in out.iterdir()) and not force:
        why = foreign or f"no {MANIFEST}"
        raise UnusableInput(
            f"{out}: not empty and not a site ptreg built ({why}); give an empty or new directory, "
            "or --force to build into it anyway",
        )
    return manifest


# What the default output holds so that git leaves the site out of the project it is built
# from: every file, this one included (a site is rebuilt from the registry, never committed).
IGNORE_FILE = ".gitignore"
IGNORE_ALL = "# ptreg site: built from the registry by `ptreg site`; git leaves it out\n*\n"


def _own_ignore_file(path: Path) -> bool:
    """Whether ``path`` is the .gitignore ptreg writes into a default site folder."""
    if path.name != IGNORE_FILE or path.is_symlink() or not path.is_file():
        return False
    try:
        return path.read_text(encoding="utf-8") == IGNORE_ALL
    except (OSError, UnicodeDecodeError):
        return False


def _package_digest() -> str:
    """Of the templates, the static files and the code that draws the pages: a change to any of
    them makes every page stale."""
    h = hashlib.sha256(__version__.encode())
    here = resources.files(__package__)
    for folder in ("", "templates", "static"):
        base = here.joinpath(folder) if folder else here
        for item in sorted(base.iterdir(), key=lambda p: p.name):
            if item.is_file() and item.name.endswith((".py", ".html", ".css", ".js")):
                h.update(item.name.encode() + b"\0" + item.read_bytes())
    return h.hexdigest()


def environment() -> Environment:
    from jinja2 import Environment, PackageLoader, StrictUndefined

    env = Environment(
        loader=PackageLoader("ptreg.site", "templates"),
        autoescape=True,  # every field of a record is untrusted text
        undefined=StrictUndefined,
        trim_blocks=True,
        lstrip_blocks=True,
        keep_trailing_newline=True,
    )
    return env


def build(
    index: RegistryReader,
    out: Path,
    *,
    changed: bool = False,
    force: bool = False,
    progress: Callable[[str, int, int], None] | None = None,
    ignored: bool = False,
) -> Report:
    """Write the site of the registry ``index`` reads into ``out``; ``ignored`` puts a
    .gitignore of everything in it, so that git leaves the site out of the project."""
    started = time.perf_counter()
    previous = check_output(out, force, index.root)
    # forced or not, the manifest's name must be free for ptreg's own file: never replaced
    # when it holds a symlink, a folder or another user's file
    check_working_file(out / MANIFEST, f"move it away, or give another --output than {out}")
    inputs = Inputs(index)
    package = _package_digest()
    old_pages: dict[str, Any] = previous["pages"] if previous else {}
    reuse = changed and previous is not None and previous.get("package") == package
    report = Report(out, changed_only=reuse)

    uses = _uses(inputs, previous.get("records", {}) if reuse and previous else {})
    plan = _plan(inputs, uses)
    old_broken: dict[str, str] = previous.get("broken_runs", {}) if reuse and previous else {}
    broken_runs: dict[str, str] = {}
    env = environment()
    out.mkdir(parents=True, exist_ok=True)
    if ignored and not (out / IGNORE_FILE).exists() and not (out / IGNORE_FILE).is_symlink():
        atomic_write_text(out / IGNORE_FILE, IGNORE_ALL)
    _write_static(out)
    written: dict[str, dict[str, str]] = {}
    todo = [p for p in plan if p.kind != "index"]
    with runs_read_once():  # an evaluator's page compares its runs: each run read once for all
        for n, page in enumerate(todo):
            if progress is not None and n % 200 == 0:
                progress("pages", n, len(todo))
            old = old_pages.get(page.path)
            if (
                reuse
                and isinstance(old, dict)
                and old.get("digest") == page.digest
                and (page.path in old_broken or (out / page.path).is_file())
            ):
                report.skipped += 1
                written[page.path] = old
                if page.path in old_broken:
                    broken_runs[page.path] = old_broken[page.path]
                continue
            html = _render(env, inputs, page, uses, broken_runs)
            written[page.path] = {"digest": page.digest, "kind": page.kind}
            if html is None:  # a run whose results cannot be read: listed on the index instead
                _remove(out, page.path)
                continue
            report.rendered += 1
            report.written += _write(out, page.path, html)
    # the index depends on every record: written each time, after the pages it lists
    listed = [(_run_label(path), reason) for path, reason in sorted(broken_runs.items())]
    html = env.get_template("index.html").render(base="", **index_context(inputs, listed))
    report.rendered += 1
    report.written += _write(out, INDEX, html)
    written[INDEX] = {"digest": "", "kind": "index"}
    for path in sorted(set(old_pages) - set(written)):
        if _remove(out, path):
            report.removed += 1
    manifest = {
        "format": FORMAT,
        "version": FORMAT_VERSION,
        "ptreg": __version__,
        "package": package,
        "registry": str(inputs.root),
        "pages": written,
        "records": {i: u.to_json() for i, u in sorted(uses.items())},
        "broken_runs": broken_runs,
    }
    sync_everything()  # the pages reach the disk before the manifest that vouches for them
    atomic_write_text(out / MANIFEST, dumps_pretty(manifest))
    report.pages = len(written)
    report.broken_records = len(inputs.problems)
    report.broken_runs = len(broken_runs)
    report.seconds = time.perf_counter() - started
    return report


def _run_label(path: str) -> str:
    """runs/<attempt>/<run>.html -> <attempt>/<run>"""
    return path.removeprefix("runs/").removesuffix(".html")


def _uses(inputs: Inputs, previous: dict[str, Any]) -> dict[str, Uses]:
    """For every valid record, the evaluator it names and its runs' evaluators: kept from the
    previous build when its file has the same hash, read from the file otherwise."""
    found: dict[str, Uses] = {}
    for s in inputs.summaries:
        sha = inputs.file_hash(inputs.record_name(s.id))
        old = previous.get(s.id)
        if isinstance(old, dict) and old.get("sha") == sha and isinstance(old.get("runs"), dict):
            found[s.id] = Uses(sha, old.get("evaluator"), dict(old["runs"]))
            continue
        attempt = inputs.attempt(s.id)
        if attempt is None:
            continue
        found[s.id] = Uses(sha, attempt.evaluator, {r.run_id: r.evaluator for r in attempt.runs or ()})
    return found


def _plan(inputs: Inputs, uses: dict[str, Uses]) -> list[Planned]:
    """Every page, with the registry files it is drawn from (docs/site.md)."""
    evaluators = ",".join(sorted(inputs.evaluators))  # which evaluator pages exist: dossiers and runs link them
    plan: list[Planned] = []
    tree_files = {
        root: [inputs.record_name(i) for i in members] + inputs.registry_files()
        for root, members in inputs.trees.items()
    }
    users: dict[str, set[str]] = {ref: set() for ref in inputs.evaluators}
    run_files: dict[str, list[str]] = {ref: [] for ref in inputs.evaluators}
    for s in inputs.summaries:
        own = inputs.record_name(s.id)
        runs = inputs.runs(s.id)
        files = [f for run_id, _ in runs for f in inputs.run_files(s.id, run_id)]
        tree = tree_files[inputs.tree_of.get(s.id, s.id)]
        plan.append(Planned(dossier_path(s.id), "dossier", s.id, [own, *tree, *files]))
        for run_id, _ in runs:
            plan.append(
                Planned(run_path(s.id, run_id), "run", f"{s.id}/{run_id}", [own, *inputs.run_files(s.id, run_id)])
            )
        use = uses.get(s.id)
        if use is None:
            continue
        if use.evaluator in users:
            users[use.evaluator].add(own)
        for run_id, ref in use.runs.items():
            if ref in users:
                users[ref].add(own)
                run_files[ref] += inputs.run_files(s.id, run_id)
    for root, files in tree_files.items():
        plan.append(Planned(lineage_path(root), "lineage", root, files))
    for ref in sorted(inputs.evaluators):
        own = f"{EVALUATORS_DIR}/{ref}.json"
        plan.append(Planned(evaluator_path(ref), "evaluator", ref, [own, *sorted(users[ref]), *run_files[ref]]))
    plan.append(Planned(INDEX, "index", "", []))
    for page in plan:
        page.digest = inputs.digest(page.inputs, page.kind, page.key, evaluators)
    return plan


def _render(
    env: Environment, inputs: Inputs, page: Planned, uses: dict[str, Uses], broken: dict[str, str]
) -> str | None:
    depth = page.path.count("/")
    base = "../" * depth
    if page.kind == "dossier":
        attempt = inputs.attempt(page.key)
        if attempt is None:
            return None
        readable = {r.run_id for r in attempt.runs or () if not isinstance(inputs.results(attempt.id, r.run_id), str)}
        return env.get_template("dossier.html").render(base=base, **dossier_context(inputs, attempt, readable))
    if page.kind == "run":
        attempt_id, run_id = page.key.split("/")
        results = inputs.results(attempt_id, run_id)
        if isinstance(results, str):
            broken[page.path] = results
            return None
        return env.get_template("run.html").render(base=base, **run_context(inputs, attempt_id, run_id, results))
    if page.kind == "lineage":
        return env.get_template("lineage.html").render(base=base, **lineage_context(inputs, page.key))
    if page.kind == "evaluator":
        attempts = sorted(i for i, u in uses.items() if u.evaluator == page.key or page.key in u.runs.values())
        runs = sorted(f"{i}/{run}" for i, u in uses.items() for run, ref in u.runs.items() if ref == page.key)
        users = {"attempts": attempts, "runs": [r for r in runs if f"runs/{r}.html" not in broken]}
        return env.get_template("evaluator.html").render(base=base, **evaluator_context(inputs, page.key, users))
    raise AssertionError(page.kind)


def _write(out: Path, relative: str, text: str) -> bool:
    """Write a page unless it already holds ``text``: renaming over an existing file cost about
    1.5 ms here (likely ext4 flushing a file renamed over another), reading it back far less."""
    path = inside(out, relative, f"the site in {out}")
    data = text.encode()
    try:
        info = path.lstat()  # inside() refused a symlink; a pipe or device is replaced unread
        if stat.S_ISREG(info.st_mode) and info.st_size == len(data) and path.read_bytes() == data:
            return False
    except FileNotFoundError:
        path.parent.mkdir(parents=True, exist_ok=True)
        path = inside(out, relative, f"the site in {out}")  # the folders just made are real ones
    replace_text_unsynced(path, text)
    return True


def _remove(out: Path, relative: str) -> bool:
    try:
        os.unlink(inside(out, relative, f"{out / MANIFEST}"))
    except FileNotFoundError:
        return False
    return True


def _write_static(out: Path) -> None:
    folder = resources.files(__package__).joinpath("static")
    for name in STATIC:
        _write(out, f"static/{name}", folder.joinpath(name).read_text(encoding="utf-8"))
