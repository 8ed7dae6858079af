"""Entry points, the one way to extend ptreg: read by group, without importing any plugin.

Backends (``ptreg.backends``) and workloads (``ptreg.workloads``) are both found here, ptreg's
own exactly like a third party's.
"""

from __future__ import annotations

import inspect
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


def call_problem(target: str, owner: Any, method: str, arguments: tuple[str, ...], bound: bool) -> str | None:
    """Why ``owner.method`` cannot be called with ``arguments``, or None when it can.

    ``bound``: ``owner`` is an instance, or the method is called on the class itself (a
    staticmethod or classmethod); otherwise a plain function of a class takes ``self`` first.
    """
    function = getattr(owner, method, None)
    if not callable(function):
        return f"{target} lacks {method}({', '.join(arguments)})"
    try:
        signature = inspect.signature(function)
    except (TypeError, ValueError):
        return None  # a builtin without a signature: it will say so itself when called
    if not bound and inspect.isclass(owner) and inspect.isfunction(inspect.getattr_static(owner, method)):
        signature = signature.replace(parameters=list(signature.parameters.values())[1:])
    try:
        signature.bind(*arguments)
    except TypeError as exc:
        return f"{target}: {method}({_names(signature)}) cannot be called as {method}({', '.join(arguments)}): {exc}"
    return None


def _names(signature: inspect.Signature) -> str:
    """The parameters as a reader writes them: names only, with * and ** where they apply."""

    def shown(p: inspect.Parameter) -> str:
        if p.kind is inspect.Parameter.VAR_POSITIONAL:
            return "*" + p.name
        return "**" + p.name if p.kind is inspect.Parameter.VAR_KEYWORD else p.name

    return ", ".join(shown(p) for p in signature.parameters.values())
