"""Entry points, the one way to extend ptreg: read by group, without importing any plugin.

Backends (``ptreg.backends``) and workloads (``ptreg.workloads``) are both found here, ptreg's
own exactly like a third party's.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Any


@dataclass(frozen=True)
class PluginEntry:
    """One registered plugin as its entry point names it; nothing imported yet."""

    name: str
    target: str  # "module:attribute"
    group: str
    distribution: str | None
    distribution_version: str | None
    conflicts: tuple[str, ...] = ()  # other targets registered under the same name

    def load(self) -> Any:
        """The class or factory the entry point names: a plugin's object, of no type ptreg knows."""
        from importlib.metadata import EntryPoint  # 24 ms to import: only where plugins are listed

        return EntryPoint(self.name, self.target, self.group).load()


def plugin_entries(group: str) -> dict[str, PluginEntry]:
    """Every plugin registered in ``group``, by name, without importing any.

    A name registered twice with different targets is kept once with its conflicts, because
    picking one silently would measure something nobody chose.
    """
    from importlib.metadata import distributions  # 24 ms to import: only where plugins are listed

    found: dict[str, PluginEntry] = {}
    for dist in distributions():
        for ep in dist.entry_points:
            if ep.group != group:
                continue
            dist_name = dist.metadata["Name"] if dist.metadata else None
            entry = PluginEntry(ep.name, ep.value, group, dist_name, dist.version)
            earlier = found.get(ep.name)
            if earlier is None:
                found[ep.name] = entry
            elif earlier.target != entry.target and entry.target not in earlier.conflicts:
                found[ep.name] = replace(earlier, conflicts=(*earlier.conflicts, entry.target))
    return dict(sorted(found.items()))
