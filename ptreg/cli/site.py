"""`ptreg site`: the registry as a static website, and a quick look at it (docs/site.md)."""

from __future__ import annotations

from contextlib import closing
from pathlib import Path

import typer

from .common import JsonFlag, load_index, print_json, progress_bar, registry_dir, say


def site(
    output: str | None = typer.Option(
        None,
        "--output",
        "-o",
        metavar="DIR",
        help="Where to write the site (default: site/ beside the registry, with a .gitignore that keeps it out of git).",
    ),
    changed: bool = typer.Option(
        False,
        "--changed",
        help="Rebuild only the pages whose records, runs or evaluators changed since the last build.",
    ),
    force: bool = typer.Option(False, "--force", help="Build into a non-empty directory that is not a previous site."),
    serve: bool = typer.Option(False, "--serve", help="Then serve it on 127.0.0.1 until Ctrl-C."),
    port: int = typer.Option(
        8000, "--port", min=0, max=65535, metavar="N", help="The port for --serve (0: any free one)."
    ),
    as_json: bool = JsonFlag,
) -> None:
    """Write the registry as a static website: an index, a dossier per attempt, a page per run, lineage and evaluator pages, with charts.

    The pages work opened from disk and fetch nothing from the network. Records that do not validate are listed on the index and left out of their pages. Needs the site extra: pip install 'ptreg\\[site]'.

    The default site/ holds a .gitignore of everything in it, so that a built site never shows as untracked in the project; a site written with --output gets none (commit it, or ignore it, as that folder needs).
    """
    from ..site.build import build, require_extra

    require_extra()
    root = registry_dir()
    out = Path(output) if output else root.resolve().parent / "site"
    server = None
    if serve:
        from ..site.serve import open_server

        server = open_server(out, port)  # a port in use is refused before anything is built
    try:
        with closing(load_index(warn=False)) as index, progress_bar() as progress:
            report = build(index, out, changed=changed, force=force, progress=progress, ignored=output is None)
        if as_json:
            print_json(report.to_json())
        else:
            broken = report.broken_records + report.broken_runs
            say(
                f"{out}: {report.pages} pages, {report.rendered} rendered ({report.written} of them changed), "
                f"{report.skipped} with unchanged inputs, "
                f"{report.removed} removed"
                + (f"; {broken} broken record(s) or run(s) listed on the index" if broken else "")
                + f" ({report.seconds:.1f} s)"
            )
        if server is not None:
            from ..site.serve import serve as serve_forever

            try:
                serve_forever(server, lambda url: say(f"serving {out} at {url} (Ctrl-C stops)"))
            except KeyboardInterrupt:
                say("stopped")  # Ctrl-C is how serving ends: not a failure
    finally:
        if server is not None:
            server.server_close()
