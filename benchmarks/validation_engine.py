"""Structural validation of records: pydantic's compiled core versus jsonschema on the same schema.

ptreg validates records with the pydantic models and publishes the JSON Schema generated from
them for other tools. This measures both engines on the same synthetic records, interleaved in
one process, to justify which one `ptreg validate` uses.

    python benchmarks/validation_engine.py --size 10000 --repeats 5
"""

from __future__ import annotations

import argparse
import sys
from functools import partial
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from jsonschema import Draft202012Validator
from registry_scale import synthetic_attempts
from timing import interleaved, table

from ptreg.records.attempt import Attempt
from ptreg.records.schema import generate


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--size", type=int, default=10000)
    parser.add_argument("--repeats", type=int, default=5)
    args = parser.parse_args()
    records = synthetic_attempts(args.size)["attempts"]
    validator = Draft202012Validator(generate("attempt.schema.json"))

    def with_pydantic() -> int:
        return sum(1 for r in records if Attempt.model_validate(r))

    def with_jsonschema() -> int:
        return sum(1 for r in records if not any(True for _ in validator.iter_errors(r)))

    def check(run) -> None:
        assert run() == len(records), "an engine rejected a valid synthetic record"

    samples = interleaved(
        {"pydantic": partial(check, with_pydantic), "jsonschema": partial(check, with_jsonschema)}, args.repeats
    )
    print(f"structural validation of {args.size:,} records, {args.repeats} repeats, seconds")
    print(table(samples, "engine", reference="pydantic"))


if __name__ == "__main__":
    main()
