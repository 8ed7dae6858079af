"""The names of a registry directory's files, for the modules that must not import the readers."""

from __future__ import annotations

import os
from pathlib import Path

REGISTRY_FILE = "registry.json"
# The folder of the term files, vocabulary/<vocabulary>/<term>.json (store/vocabulary_files.py).
VOCABULARY_DIR = "vocabulary"
# A record file larger than this is refused unread: its free text is capped at
# records.attempt.TEXT_MAX_LENGTH characters, so only a broken or hostile file comes near it. The
# single-file attempts.json holds a whole registry and has no such cap.
RECORD_FILE_MAX_BYTES = 2 * 1024 * 1024
JOURNAL_FILE = ".ptreg-journal.json"
# The derived query index (store/index/): a working file, deleted at will, never exported.
INDEX_FILE = ".ptreg-index.sqlite"
# The change watcher's socket (store/watch.py): exists while `ptreg index watch` runs.
SOCKET_FILE = ".ptreg-watch.sock"
# Held by the one watcher of a directory; a lock file of its own, since writers lock the directory.
WATCH_LOCK_FILE = ".ptreg-watch.lock"
# The folder of an attempt's runs, runs/<attempt id>/<run id> (store/runs.py reads them).
RUNS_DIR = "runs"
# A run's in-progress folder, runs/<attempt id>/.running-<run id>/, until its run folder is written (store/progress.py).
RUNNING_PREFIX = ".running-"


def has_runs(root: Path, attempt_id: str) -> bool:
    """Whether ``attempt_id`` has a run folder (complete, interrupted or stopped by its budget:
    each is evidence to conclude on), without reading any. Hidden folders (a run being
    written) do not count."""
    try:
        with os.scandir(root / RUNS_DIR / attempt_id) as entries:
            return any(e.is_dir(follow_symlinks=False) and not e.name.startswith(".") for e in entries)
    except OSError:
        return False
