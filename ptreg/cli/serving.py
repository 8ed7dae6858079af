"""`ptreg mcp`: the registry served to agents over the Model Context Protocol (docs/agents.md)."""

from __future__ import annotations

import typer

from ..errors import EXIT_UNUSABLE, PtregError
from .common import registry_dir


def mcp() -> None:
    """Serve this registry to agents over the Model Context Protocol, on stdin and stdout, until the client leaves.

    Tools: list_attempts, show_attempt, precedents, lineage, streaks, propose, next_attempts, run_attempt, conclude_attempt; each attempt is also a resource, ptreg://attempt/ID. Proposals go through the same gate and locks as `ptreg new`, runs through the same engine and budget as `ptreg run`. A client that cancels a run, or leaves, stops it: what finished is written as an interrupted run. SIGTERM, SIGINT or SIGHUP stops every run the same way, answers every call in flight, and ends the server (exit 143, 130 or 129). Needs ptreg's optional `mcp` extra (docs/agents.md).
    """
    try:
        # the SDK loads only here, never on the start-up path of the other commands
        from ..agents.server import serve
    except ModuleNotFoundError as exc:
        if exc.name is not None and exc.name.split(".")[0] == "mcp":
            raise PtregError(
                "`ptreg mcp` needs the MCP SDK, which is not installed: pip install 'ptreg[mcp]'", EXIT_UNUSABLE
            ) from None
        raise
    from ..store.directory import load_meta

    root = registry_dir()
    load_meta(root)  # no registry: said in one line before any client is served
    stopped_by = serve(root)
    if stopped_by is not None:
        raise typer.Exit(128 + stopped_by)
