"""The rerun gate's queries of the index: the attempts its checks of one proposal can read,
and a count of those it need not read one by one (``gate/inputs.py`` builds its inputs from them)."""

from __future__ import annotations

import json

from ...records.ledger import Shaped, Summary
from .connection import Connected
from .rows import LEDGER_ORDER, SUMMARY_COLUMNS, summary_of_row


class GateQueries(Connected):
    """What the gate asks of the index."""

    def gate_candidates(self, attempt: Shaped) -> list[Summary]:
        """The valid attempts the gate's checks of ``attempt`` can read, in the ledger's order:
        its lineage (every attempt below the oldest ancestor of it or of what it varies) and its
        tracking issue, with every ancestor of each, and every attempt of its family (one that
        asks no question is compared by its name, hypothesis and lesson; its objective's streak is
        found apart: ``gate/gate_inputs.py``). The checks give the same answer on these as on every
        attempt (tests/store/test_index.py)."""
        sql = f"""
            WITH RECURSIVE
            up(id) AS (
                SELECT value FROM json_each(?)
                UNION SELECT a.varied_from FROM attempts a JOIN up ON a.id = up.id WHERE a.varied_from IS NOT NULL
            ),
            lineage(id) AS (
                SELECT id FROM up
                UNION SELECT a.id FROM attempts a JOIN lineage ON a.varied_from = lineage.id WHERE a.id IS NOT NULL
            ),
            alike(id) AS (
                SELECT id FROM lineage
                UNION SELECT id FROM attempts WHERE id IS NOT NULL AND tracking_issue = ?
            ),
            wanted(id) AS (
                SELECT id FROM alike
                UNION SELECT a.varied_from FROM attempts a JOIN wanted ON a.id = wanted.id
                WHERE a.varied_from IS NOT NULL
            )
            SELECT {SUMMARY_COLUMNS} FROM attempts
            WHERE id IS NOT NULL AND (
                id IN (SELECT id FROM wanted)
                OR id IN (SELECT id FROM attempts WHERE family = ?)
            ) ORDER BY {LEDGER_ORDER}"""
        start = [attempt.id] if attempt.varied_from is None else [attempt.id, attempt.varied_from]
        params = (json.dumps(start), attempt.tracking_issue, attempt.family)
        return [summary_of_row(r) for r in self._rows(sql, params)]
