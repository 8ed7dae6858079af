"""ptreg's built-in kernel backends.

Each module holds one backend class, registered in ptreg's ``pyproject.toml`` under the
``ptreg.backends`` entry-point group exactly as a third-party package would register its own;
ptreg finds them only through that group. The contract they keep is in ``docs/backends.md``.
"""
