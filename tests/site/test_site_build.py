"""`ptreg site` without a browser: the pages it writes, what they hold, escaping, broken input,
the output directory's guard, --changed, and the one-line errors."""

from __future__ import annotations

import json
import re
import shutil
import socket
import subprocess
import sys
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import pytest

from helpers import (
    REPO,
    Result,
    assert_one_line_error,
    complete_record,
    failed_record,
    project_lineage,
    snapshot,
    write_registry,
)

pytest.importorskip("jinja2")
pytest.importorskip("matplotlib")

HOSTILE_SCRIPT = "<script>alert(1)</script>"
HOSTILE_ATTR = '"><img src=x onerror=alert(2)>'


def project_registry(tmp_path: Path) -> Path:
    """A copy of this project's own registry (attempts/, with its runs and evaluators)."""
    root = tmp_path / "attempts"
    shutil.copytree(REPO / "attempts", root, ignore=shutil.ignore_patterns(".ptreg*"))
    return root


def marks_in(html: str, chart: str) -> int:
    return len(re.findall(rf'id="{re.escape(chart)}-mark-\d+"', html))


def table_marks(html: str, chart: str) -> int:
    table = re.search(rf'<table class="chart-data" data-chart="{re.escape(chart)}">(.*?)</table>', html, re.S)
    assert table is not None, chart
    return sum(int(n) for n in re.findall(r'<tr data-marks="(\d+)"', table.group(1)))


@dataclass(frozen=True)
class ProjectSite:
    root: Path
    before: dict[str, bytes]  # the registry's files before the build
    out: Path
    built: Result


@pytest.fixture(scope="module")
def project_site(tmp_path_factory: pytest.TempPathFactory) -> ProjectSite:
    """The project's registry built once for the tests that only read its pages (a build of it
    takes most of this module's time); each test that changes the registry or the site copies
    its own."""
    work = tmp_path_factory.mktemp("project-site")
    root = project_registry(work)
    before = snapshot(root)
    out = work / "out"
    ptreg = str(Path(sys.executable).parent / "ptreg")
    done = subprocess.run(
        [ptreg, "--registry", str(root), "site", "-o", str(out), "--json"], capture_output=True, text=True, cwd=work
    )
    return ProjectSite(root, before, out, Result(done.returncode, done.stdout, done.stderr))


def test_every_page_of_the_project_registry(project_site: ProjectSite) -> None:
    root, out, result = project_site.root, project_site.out, project_site.built
    assert result.code == 0, result.err
    summary = result.json()
    assert summary["written"] == summary["rendered"] == summary["pages"] and summary["skipped"] == 0
    assert summary["seconds"] > 0
    ids = sorted(p.stem for p in root.glob("*.json") if p.name != "registry.json")
    assert sorted(p.stem for p in (out / "attempts").glob("*.html")) == ids
    runs = sorted(f"{p.parent.name}/{p.name}" for p in (root / "runs").glob("*/*"))
    assert sorted(f"{p.parent.name}/{p.stem}" for p in (out / "runs").glob("*/*.html")) == runs
    evaluators = sorted(p.stem for p in (root / "evaluators").glob("*.json"))
    assert sorted(p.stem for p in (out / "evaluators").glob("*.html")) == evaluators
    assert (out / "index.html").is_file() and (out / ".ptreg-site.json").is_file()
    # one lineage page per chain; every dossier names one that exists
    for dossier in (out / "attempts").glob("*.html"):
        lineage = re.search(r'href="\.\./(lineage/[^"]+\.html)"', dossier.read_text())
        assert lineage is not None and (out / lineage.group(1)).is_file(), dossier
    assert snapshot(root) == project_site.before  # nothing written into the registry (its index aside)
    assert summary["pages"] == len(ids) + len(runs) + len(evaluators) + len(list((out / "lineage").glob("*.html"))) + 1


def test_run_pages_draw_one_mark_per_measured_number(project_site: ProjectSite) -> None:
    root, out = project_site.root, project_site.out
    assert project_site.built.code == 0, project_site.built.err
    page = (out / "runs" / "tinygpt-step-attribution" / "20261201T063034Z.html").read_text()
    results = json.loads((root / "runs" / "tinygpt-step-attribution" / "20261201T063034Z" / "results.json").read_text())
    measured = [c for c in results["cells"] if c["status"] == "measured"]
    assert marks_in(page, "time") == table_marks(page, "time") == len(measured)
    with_share = [c for c in measured if c.get("attribution")]
    assert marks_in(page, "shares") == table_marks(page, "shares") == 4 * len(with_share)
    speedups = [c for c in results["cells"] if c.get("vs_naive_ratio") or c.get("vs_naive") is not None]
    assert marks_in(page, "vs-reference") == table_marks(page, "vs-reference") == len(speedups)
    assert "log scale" in page  # 42 to 10,000 ms per step spans more than 10x
    # text stays text in the drawings, and nothing is fetched
    assert "<path" in page and "font-family" in page and "http://" not in page.replace("http://www.w3.org", "")
    history = (out / "evaluators" / "tinygpt-sweep@617e6bca163b.html").read_text()
    assert marks_in(history, "history") == table_marks(history, "history") > 0


def test_the_build_is_deterministic(cli: Callable[..., Result], project_site: ProjectSite, tmp_path: Path) -> None:
    """A second build, in this process, of the registry the module built in another: the same bytes."""
    assert project_site.built.code == 0, project_site.built.err
    again = tmp_path / "again"
    assert cli("--registry", project_site.root, "site", "-o", again).code == 0
    pages = sorted(p.relative_to(project_site.out) for p in project_site.out.rglob("*.html"))
    assert pages
    assert sorted(p.relative_to(again) for p in again.rglob("*.html")) == pages
    for page in pages:
        assert (project_site.out / page).read_bytes() == (again / page).read_bytes(), page


def test_a_hostile_lesson_is_text(cli: Callable[..., Result], tmp_path: Path) -> None:
    root = write_registry(
        tmp_path / "registry",
        [
            complete_record("root-attempt"),
            failed_record(
                "hostile",
                lesson=f"{HOSTILE_SCRIPT} and {HOSTILE_ATTR}",
                name=HOSTILE_ATTR,
                varied_from="root-attempt",
                varied=HOSTILE_SCRIPT,
            ),
        ],
    )
    out = tmp_path / "out"
    assert cli("--registry", root, "site", "-o", out).code == 0
    for page in (out / "index.html", out / "attempts" / "hostile.html", out / "lineage" / "root-attempt.html"):
        html = page.read_text()
        assert "<script>alert" not in html and "<img src=x" not in html, page
        assert "&lt;script&gt;alert(1)&lt;/script&gt;" in html, page


def test_broken_records_are_listed_and_left_out(cli: Callable[..., Result], tmp_path: Path) -> None:
    root = write_registry(
        tmp_path / "registry",
        [complete_record("fine"), {"id": "broken", "status": "no-such-status"}],
        files={"unparsable.json": "{not json"},
    )
    before = snapshot(root)
    out = tmp_path / "out"
    result = cli("--registry", root, "site", "-o", out, "--json")
    assert result.code == 0 and "Traceback" not in result.err
    assert result.json()["broken_records"] >= 2
    index = (out / "index.html").read_text()
    assert "broken.json" in index and "unparsable.json" in index
    assert [p.name for p in (out / "attempts").glob("*.html")] == ["fine.html"]
    assert snapshot(root) == before


def test_an_unreadable_run_is_listed_and_has_no_page(cli: Callable[..., Result], tmp_path: Path) -> None:
    root = project_lineage(tmp_path / "attempts", "tinygpt-fast-kernels", "cli-lazy-imports")
    (root / "runs" / "tinygpt-fast-kernels" / "20261201T083022Z" / "results.json").write_text("[1, 2")
    out = tmp_path / "out"
    result = cli("--registry", root, "site", "-o", out, "--json")
    assert result.code == 0 and result.json()["broken_runs"] == 1
    assert not (out / "runs" / "tinygpt-fast-kernels" / "20261201T083022Z.html").exists()
    assert (out / "runs" / "tinygpt-fast-kernels" / "20261201T092700Z.html").is_file()
    assert "tinygpt-fast-kernels/20261201T083022Z" in (out / "index.html").read_text()


def test_a_directory_that_is_not_a_site_is_refused(cli: Callable[..., Result], tmp_path: Path) -> None:
    root = write_registry(tmp_path / "registry", [complete_record("fine")])
    out = tmp_path / "mine"
    out.mkdir()
    (out / "notes.txt").write_text("keep me")
    assert_one_line_error(cli("--registry", root, "site", "-o", out), 2, str(out), "--force")
    assert sorted(p.name for p in out.iterdir()) == ["notes.txt"]
    assert cli("--registry", root, "site", "-o", out, "--force").code == 0
    assert (out / "notes.txt").read_text() == "keep me" and (out / "index.html").is_file()
    assert cli("--registry", root, "site", "-o", out).code == 0  # now a previous site: rebuilt
    (tmp_path / "file").write_text("")
    assert_one_line_error(cli("--registry", root, "site", "-o", tmp_path / "file"), 2, "not a directory")
    before = snapshot(root)
    for inside in (root, root / "site", tmp_path):  # its pages would land among the records
        assert_one_line_error(cli("--registry", root, "site", "-o", inside, "--force"), 2, "holds the registry")
    assert snapshot(root) == before


@pytest.mark.parametrize(
    "page",
    [
        "../registry/registry.json",  # the case: a record of the registry beside the site
        "{victim}",  # an absolute path
        "attempts/../../victim.txt",
        "attempts/fine.json",  # inside, but not a page ptreg writes
        "",
        "index.html/../../victim.txt",
    ],
)
def test_a_forged_manifest_deletes_nothing(cli: Callable[..., Result], tmp_path: Path, page: str) -> None:
    """A manifest naming any path that is not a page ptreg writes is not ptreg's: the directory
    is refused as foreign in one line; forced, it is built into, and nothing the manifest names
    is removed."""
    root = write_registry(tmp_path / "registry", [complete_record("fine")])
    victim = tmp_path / "victim.txt"
    victim.write_text("keep me")
    out = tmp_path / "site"
    out.mkdir()
    forged = page.replace("{victim}", str(victim))
    (out / ".ptreg-site.json").write_text(json.dumps({"format": "ptreg-site", "pages": {forged: {}}}))
    before = snapshot(root), snapshot(out)
    result = cli("--registry", root, "site", "-o", out)
    assert_one_line_error(result, 2, str(out), "not a site ptreg built", "--force")
    assert (snapshot(root), snapshot(out)) == before and victim.read_text() == "keep me"
    assert cli("--registry", root, "site", "-o", out, "--force").code == 0
    assert snapshot(root) == before[0] and victim.read_text() == "keep me"
    assert forged not in json.loads((out / ".ptreg-site.json").read_text())["pages"]


def test_a_manifest_that_is_a_symlink_is_not_read(cli: Callable[..., Result], tmp_path: Path) -> None:
    root = write_registry(tmp_path / "registry", [complete_record("fine")])
    elsewhere = tmp_path / "elsewhere.json"
    elsewhere.write_text(json.dumps({"format": "ptreg-site", "pages": {"attempts/fine.html": {}}}))
    out = tmp_path / "site"
    out.mkdir()
    (out / ".ptreg-site.json").symlink_to(elsewhere)
    result = cli("--registry", root, "site", "-o", out)
    assert_one_line_error(result, 2, str(out), ".ptreg-site.json is a symlink")
    assert (out / ".ptreg-site.json").is_symlink() and sorted(p.name for p in out.iterdir()) == [".ptreg-site.json"]
    forced = cli("--registry", root, "site", "-o", out, "--force")  # nor replaced when forced
    assert_one_line_error(forced, 2, f"{out / '.ptreg-site.json'}: is a symlink", "left alone")
    assert (out / ".ptreg-site.json").is_symlink() and sorted(p.name for p in out.iterdir()) == [".ptreg-site.json"]
    (out / ".ptreg-site.json").unlink()
    (out / ".ptreg-site.json").mkdir()
    forced = cli("--registry", root, "site", "-o", out, "--force")
    assert_one_line_error(forced, 2, f"{out / '.ptreg-site.json'}: is a directory", "left alone")


def test_a_symlinked_folder_in_a_site_is_never_written_or_deleted_through(
    cli: Callable[..., Result], tmp_path: Path
) -> None:
    """A previous site whose attempts/ (or runs/<id>/) was replaced by a symlink to a folder
    elsewhere: the rebuild is refused at that folder, and the files there keep their bytes."""
    root = write_registry(tmp_path / "registry", [complete_record("fine"), complete_record("gone")])
    out = tmp_path / "site"
    assert cli("--registry", root, "site", "-o", out).code == 0
    (root / "gone.json").unlink()  # its page is one the rebuild removes
    elsewhere = tmp_path / "elsewhere"
    shutil.move(out / "attempts", elsewhere)
    (out / "attempts").symlink_to(elsewhere, target_is_directory=True)
    kept = snapshot(elsewhere)
    assert set(kept) == {"fine.html", "gone.html"}
    result = cli("--registry", root, "site", "-o", out)
    assert_one_line_error(result, 2, f"{out / 'attempts'}: a symlink inside {out}", "never writes or deletes through")
    assert snapshot(elsewhere) == kept and (out / "attempts").is_symlink()


def test_default_output_is_beside_the_registry(cli: Callable[..., Result], tmp_path: Path) -> None:
    root = write_registry(tmp_path / "attempts", [complete_record("fine")])
    assert cli("--registry", root, "site").code == 0
    assert (tmp_path / "site" / "attempts" / "fine.html").is_file()


def test_changed_rebuilds_only_what_moved(cli: Callable[..., Result], tmp_path: Path) -> None:
    # a lineage of four, and an attempt of another lineage and evaluator whose pages stay put
    root = project_lineage(tmp_path / "attempts", "numba-packing-step-xl", "tinygpt-fast-kernels", "cli-lazy-imports")
    out = tmp_path / "out"
    first = cli("--registry", root, "site", "-o", out, "--json").json()
    stamps = {p: p.stat().st_mtime_ns for p in out.rglob("*.html")}
    again = cli("--registry", root, "site", "-o", out, "--changed", "--json").json()
    # the index alone is drawn again, and found to hold the same bytes
    assert again["rendered"] == 1 and again["written"] == 0 and again["skipped"] == first["pages"] - 1
    # one record edited: its dossier, its runs' pages, its lineage's dossiers and graph, its evaluator
    record = json.loads((root / "tinygpt-fast-kernels.json").read_text())
    record["lesson"] = "A lesson edited after the build."
    (root / "tinygpt-fast-kernels.json").write_text(json.dumps(record, indent=2))
    edited = cli("--registry", root, "site", "-o", out, "--changed", "--json").json()
    rewritten = {str(p.relative_to(out)) for p, stamp in stamps.items() if p.stat().st_mtime_ns != stamp}
    # its lineage is every attempt here of the tree rooted at tinygpt-step-attribution
    records = [json.loads(f.read_text()) for f in root.glob("*.json") if f.name != "registry.json"]
    parents = {a["id"]: a.get("varied_from") for a in records}

    def tree_root(attempt_id: str) -> str:
        while parents.get(attempt_id) in parents:
            attempt_id = str(parents[attempt_id])
        return attempt_id

    lineage = {i for i in parents if tree_root(i) == "tinygpt-step-attribution"}
    assert {"tinygpt-fast-kernels", "numba-packing-step-xl"} < lineage
    depending = {
        "index.html",
        *(f"attempts/{i}.html" for i in lineage),
        "lineage/tinygpt-step-attribution.html",
        "runs/tinygpt-fast-kernels/20261201T083022Z.html",
        "runs/tinygpt-fast-kernels/20261201T092700Z.html",
        "evaluators/tinygpt-sweep@617e6bca163b.html",
    }
    assert edited["rendered"] == len(depending)
    # of those, the pages that show the lesson hold new bytes; the others are left as they were
    assert {"index.html", "attempts/tinygpt-fast-kernels.html", "lineage/tinygpt-step-attribution.html"} <= rewritten
    assert rewritten <= depending and edited["written"] == len(rewritten)
    assert "A lesson edited after the build." in (out / "attempts" / "tinygpt-fast-kernels.html").read_text()
    # an attempt removed: its pages go too
    (root / "cli-lazy-imports.json").unlink()
    gone = cli("--registry", root, "site", "-o", out, "--changed", "--json").json()
    assert gone["removed"] >= 1 and not (out / "attempts" / "cli-lazy-imports.html").exists()


def test_without_the_extra_one_line_says_how_to_install_it(
    cli: Callable[..., Result], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    root = write_registry(tmp_path / "registry", [complete_record("fine")])
    monkeypatch.setitem(sys.modules, "jinja2", None)  # import jinja2 now raises ImportError
    assert_one_line_error(cli("--registry", root, "site", "-o", tmp_path / "out"), 2, "pip install 'ptreg[site]'")
    assert not (tmp_path / "out").exists()


def test_a_port_in_use_is_one_line(cli: Callable[..., Result], tmp_path: Path) -> None:
    root = write_registry(tmp_path / "registry", [complete_record("fine")])
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        result = cli("--registry", root, "site", "-o", tmp_path / "out", "--serve", "--port", port)
    assert_one_line_error(result, 2, f"--port {port}", "in use")
    assert not (tmp_path / "out").exists()


def test_the_shared_registry_builds(cli: Callable[..., Result], shared_registry: Path, tmp_path: Path) -> None:
    out = tmp_path / "out"
    result = cli("--registry", shared_registry, "site", "-o", out, "--json")
    assert result.code == 0, result.err
    records = [p for p in shared_registry.glob("*.json") if p.name != "registry.json"]
    assert len(list((out / "attempts").glob("*.html"))) == len(records) - result.json()["broken_records"]
    index = (out / "index.html").read_text()
    assert index.count('<tr data-status="') == len(list((out / "attempts").glob("*.html")))


def test_changed_redraws_the_dossiers_when_a_term_changes(cli: Callable[..., Result], tmp_path: Path) -> None:
    """A term's definition is shown on every dossier: a term file changed by hand, a checkout or
    a merge redraws them with --changed, as registry.json did when it held the vocabularies."""
    root = write_registry(tmp_path / "attempts", [complete_record("fine")])
    out = tmp_path / "out"
    assert cli("--registry", root, "site", "-o", out).code == 0
    term = root / "vocabulary" / "kind" / "runtime-benchmark.json"
    held = json.loads(term.read_text())
    term.write_text(json.dumps({**held, "description": None}), encoding="utf-8")  # as if imported without one
    again = cli("--registry", root, "site", "-o", out, "--changed", "--json").json()
    assert again["rendered"] > 1
    assert "imported without a definition" in (out / "attempts" / "fine.html").read_text()
