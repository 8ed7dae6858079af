"""The names of a registry directory's files, for the modules that must not import the readers."""

from __future__ import annotations

REGISTRY_FILE = "registry.json"
# A record file larger than this is refused unread: its free text is capped at
# records.attempt.TEXT_MAX_LENGTH characters, so only a broken or hostile file comes near it. The
# single-file attempts.json holds a whole registry and has no such cap.
RECORD_FILE_MAX_BYTES = 2 * 1024 * 1024
JOURNAL_FILE = ".ptreg-journal.json"
# The derived query index (store/index/): a working file, deleted at will, never exported.
INDEX_FILE = ".ptreg-index.sqlite"
# The change watcher's socket (store/watch.py): exists while `ptreg index watch` runs.
SOCKET_FILE = ".ptreg-watch.sock"
