"""`python -m ptreg`: the same as the `ptreg` command."""

from .cli import main

main()
