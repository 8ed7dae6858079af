"""The derived query index: a SQLite file beside the records that answers the queries without
reading every record file. The record files stay the truth; the index is a working file
(``.ptreg-index.sqlite``, git-ignored, never exported) that can be deleted at any time.

It holds, per record file, the size, mtime, ctime, inode and SHA-256 it was built from; per
valid attempt, its shape, status, lineage edge (varied_from), question (and its tokens), lesson,
disposition and tracking issue, and the summary of each linked run; per unusable file, the
problems ``load_directory`` reports; and the vocabularies of ``registry.json`` once validated.

Never trusted blindly: every command that opens it first stats each file of the directory (one
``stat`` per file: the directory's mtime misses an edit made in place, so it is not a safe
signal) and re-reads exactly the files that are new, changed or gone. A file changed within
``RACY_NS`` of the moment the index saw it is re-hashed on the next check, since a change in
the same clock tick keeps its size and mtime (git's "racy clean" case). An index that is not
a SQLite file, belongs to another program or has another schema is deleted and rebuilt. ptreg's
own writes update it before they release the registry lock (``locks.py``); a writer killed in
between leaves stamps that no longer match, which the next command re-reads.

It also keeps results derived from all of them that a command would otherwise recompute from
every row (the streaks' chains, the admission's registry digest): each is stored as JSON under a
key naming what it is and the code that computed it (ptreg's version and the stamps of its
source files), and every change to the indexed files deletes them all, so a kept result is
always the one the rows as they stand give.

Nothing here imports pydantic: a command whose files have not changed never builds the models.
Parsing a changed file goes through ``record_file`` (imported only then).

One subject per module: ``rows`` (the tables, and ``Refresh``, what a check found), ``file``
(the file, its header and the signature of ptreg's writes), ``freshness`` (the check against
the directory), ``connection`` (an open, checked connection and the results kept beside the
rows), ``gate_queries`` and ``lookups`` (``Index``), and ``check`` (the writes' hook and
`ptreg index check`). ``store/reader.py`` is the protocol ``Index`` implements.
"""

from .check import Difference, compare_with_files, update_after_write
from .file import check_index_files, file_size, index_path, usable_directory
from .freshness import listing, scan
from .lookups import Index, open_index, opened
from .rows import APPLICATION_ID, ATTEMPT_COLUMNS, INDEX_SCHEMA, RACY_NS, Refresh, RegistryVocabularies

__all__ = [
    "APPLICATION_ID",
    "ATTEMPT_COLUMNS",
    "INDEX_SCHEMA",
    "RACY_NS",
    "Difference",
    "Index",
    "Refresh",
    "RegistryVocabularies",
    "check_index_files",
    "compare_with_files",
    "file_size",
    "index_path",
    "listing",
    "open_index",
    "opened",
    "scan",
    "update_after_write",
    "usable_directory",
]
