"""`ptreg index`: the derived query index beside the record files (docs/index.md)."""

from __future__ import annotations

import sys
import time
from pathlib import Path
from typing import TYPE_CHECKING

import typer

from ..errors import EXIT_CHECK_FAILED
from ..text import counted
from .common import JsonFlag, RegistryCommand, RegistryGroup, load_index, print_json, progress_bar, registry_dir, say

if TYPE_CHECKING:
    from ..store.reader import RegistryReader


app = typer.Typer(
    name="index",
    cls=RegistryGroup,
    help="""The query index: a SQLite file of working data beside the records (.ptreg-index.sqlite, git-ignored).

    list, lineage, streaks, coverage, precedents, show's lineage and the gate read it. Every command first checks it against the directory (one stat per file) and re-reads exactly the files that changed, so a hand edit, a git pull or a deleted file is seen at once; a corrupt, foreign or outdated index is rebuilt. The record files stay the truth, and the index can be deleted at any time. Alone, `ptreg index` brings it up to date and describes it.
    """,
    invoke_without_command=True,
)


@app.callback()
def describe(context: typer.Context, as_json: bool = JsonFlag) -> None:
    """Bring the index up to date and describe it (when no command is given)."""
    if context.invoked_subcommand is None:
        _describe(as_json, rebuild=False)


@app.command(cls=RegistryCommand)
def rebuild(as_json: bool = JsonFlag) -> None:
    """Delete the index and build it again from every record file."""
    _describe(as_json, rebuild=True)


@app.command(cls=RegistryCommand)
def check(as_json: bool = JsonFlag) -> None:
    """Compare the index as it stands with a full read of every file, without updating it; exit 1 if they differ."""
    from ..store.index import compare_with_files, index_path

    root = registry_dir()
    if not index_path(root).exists():
        load_index(warn=False).close()  # validates the registry first, as any command does
        say(f"{index_path(root)}: no index yet; built it now", err=True)
    differences, compared = compare_with_files(root)
    if as_json:
        print_json({"files": compared, "differences": [{"file": d.name, "what": d.what} for d in differences]})
    else:
        for d in differences[:20]:
            say(f"{d.name}: {_what[d.what]}")
        if len(differences) > 20:
            say(f"... and {len(differences) - 20} more")
        verdict = "agrees with the files" if not differences else f"differs from the files in {len(differences)}"
        say(f"{index_path(root)}: {counted(compared, 'file')} compared; the index {verdict}")
    if differences:
        raise typer.Exit(EXIT_CHECK_FAILED)


@app.command(cls=RegistryCommand)
def watch(as_json: bool = JsonFlag) -> None:
    """Stay running as the registry's change watcher (Linux inotify); Ctrl-C stops it.

    On a large registry, checking every file is most of a command's time; with a watcher running, a command asks it what changed instead (docs/index.md). PTREG_WATCHER=off makes a command check every file anyway. Needs the watch extra: pip install 'ptreg\\[watch]'.
    """
    _watch(registry_dir(), as_json)


def _describe(as_json: bool, *, rebuild: bool) -> None:
    from ..store.index import file_size, index_path

    root = registry_dir()
    began = time.perf_counter()
    opened: RegistryReader
    if rebuild:
        from ..store.index import open_index, usable_directory

        if not usable_directory(root):
            load_index(warn=False).close()  # its one-line error, or a cut-short import finished
        with progress_bar() as progress:
            opened = open_index(root, rebuild=True, progress=progress)
    else:
        opened = load_index(warn=False)
    try:
        seconds = time.perf_counter() - began
        refresh = opened.refresh
        records, valid, size = opened.records(), opened.valid(), None if refresh.in_memory else file_size(root)
        described = {
            "index": str(index_path(root)),
            "in_memory": refresh.in_memory,
            "rebuilt": refresh.rebuilt,
            "records": records,
            "valid": valid,
            "reread": len(refresh.reread),
            "rehashed": refresh.rehashed,
            "removed": len(refresh.removed),
            "bytes": size,
            "seconds": round(seconds, 3),
            "watched": refresh.watched,
        }
    finally:
        opened.close()
    if as_json:
        print_json(described)
        return
    if refresh.in_memory:
        say(f"{index_path(root)}: cannot be written here; the index was built in memory for this command")
    how = f"built ({refresh.rebuilt})" if refresh.rebuilt else "up to date"
    say(
        f"{index_path(root)}: {how} in {seconds:.2f} s; {counted(records, 'record file')} "
        f"({valid} valid); re-read {len(refresh.reread)}, removed {len(refresh.removed)}"
        + (f"; {size / 2**20:.1f} MiB" if size is not None else "")
        + ("; a change watcher named the files to look at" if refresh.watched else "")
    )


def _watch(root: Path, as_json: bool) -> None:
    from ..store.watcher import serve

    load_index(warn=False).close()  # the registry's own one-line error first, and an index to answer with

    def ready(watcher: str) -> None:
        if as_json:
            print_json({"watching": str(root), "watcher": watcher})
            sys.stdout.flush()
        else:
            say(
                f"{root}: watching (watcher {watcher}); other commands now look only at what changes; Ctrl-C stops",
                err=True,
            )

    why = serve(root, ready)
    if as_json:
        print_json({"stopped": why})
    else:
        say(f"{root}: no longer watched: {why}", err=True)
    if why.endswith("is gone"):
        raise typer.Exit(EXIT_CHECK_FAILED)


_what = {
    "missing": "in the files, not in the index",
    "extra": "in the index, no longer in the files",
    "stale": "changed since the index read it",
    "differs": "the index holds something other than the file says",
    "unsigned": "changed by another program since ptreg wrote it (the next command rebuilds it)",
}
