"""The numbers a comparison of runs is decided by, in a module that imports nothing, so that
the command line's help states them from here (it loads no library to show its help) and the
comparison itself reads the same values."""

from __future__ import annotations

# A verdict across runs needs the spread of a cell's centre from batch to batch, and k batches
# estimate it from k values. Fewer than 4 give no verdict: the older test's false alarms
# passed 5% at 3 runs, and the tail in engine/stats.py (HISTORY_TAILS) is fitted from 4 on.
MIN_HISTORY = 4

# The chance that a comparison calls any unchanged cell (or arm's metric) slower or faster, at
# most: Holm's step-down across them all.
FAMILY_ERROR_RATE = 0.05
ADJUSTMENT = "Holm"

# The change that counts, unless --threshold says otherwise: a time moves by a few percent from
# run to run on a quiet machine, an instruction count of unchanged code by under 0.1%
# (engine/stats.py COUNT_DRIFT), so a 1% change is what counts resolve. Runs of arms are judged
# against the times' threshold.
TIMES_THRESHOLD = 0.05
COUNTS_THRESHOLD = 0.01
