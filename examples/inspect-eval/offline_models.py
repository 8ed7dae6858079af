"""Two offline "models" of the weekday task, as an Inspect model API (`almanac/rule`,
`almanac/lookup`): no network, no weights, the same answer every time.

- rule: counts the days from 2000-01-01, a Saturday, with a leap year every fourth year (the
  Julian rule, which forgets that 1700, 1800, 1900, 2100 and 2200 are not leap years), and shows
  its count before the answer.
- lookup: a 200-year almanac, 1850-2049, printed from the calendar; it answers "unknown"
  outside it.

Usage is counted in words, as no tokenizer is at hand offline: the prompt's words in, the
answer's words out."""

from __future__ import annotations

import datetime
import re

from inspect_ai.model import GenerateConfig, ModelAPI, ModelOutput, ModelUsage, modelapi

WEEKDAYS = ("Monday", "Tuesday", "Wednesday", "Thursday", "Friday", "Saturday", "Sunday")
ANCHOR_YEAR, ANCHOR_WEEKDAY = 2000, 5  # 2000-01-01 was a Saturday (Monday is 0)
ALMANAC = (1850, 2049)
DATE = re.compile(r"(\d{4})-(\d{2})-(\d{2})")
NO_CONFIG = GenerateConfig()  # what Inspect passes when the eval sets no generate config


def julian_days_from_anchor(year: int, month: int, day: int) -> int:
    """Days from 2000-01-01 to the date, every fourth year a leap year."""
    lengths = [31, 29 if year % 4 == 0 else 28, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31]
    into_year = sum(lengths[: month - 1]) + day - 1
    whole_years = sum(366 if y % 4 == 0 else 365 for y in range(min(year, ANCHOR_YEAR), max(year, ANCHOR_YEAR)))
    return into_year + (whole_years if year >= ANCHOR_YEAR else -whole_years)


def rule(year: int, month: int, day: int) -> str:
    days = julian_days_from_anchor(year, month, day)
    weekday = WEEKDAYS[(ANCHOR_WEEKDAY + days) % 7]
    return f"{days} days from 2000-01-01, {days % 7} past a Saturday: {weekday}"


def lookup(year: int, month: int, day: int) -> str:
    if not ALMANAC[0] <= year <= ALMANAC[1]:
        return "unknown"
    return WEEKDAYS[datetime.date(year, month, day).weekday()]


class Almanac(ModelAPI):
    def __init__(self, model_name, base_url=None, api_key=None, config=NO_CONFIG, **model_args):  # type: ignore[no-untyped-def]
        super().__init__(model_name, base_url, api_key, [], config)
        if model_name not in ("rule", "lookup"):
            raise ValueError(f"almanac has the models rule and lookup, not {model_name!r}")

    async def generate(self, input, tools, tool_choice, config):  # type: ignore[no-untyped-def]
        prompt = input[-1].text
        found = DATE.search(prompt)
        if found is None:
            answer = "unknown"
        else:
            year, month, day = (int(part) for part in found.groups())
            answer = (rule if self.model_name == "rule" else lookup)(year, month, day)
        output = ModelOutput.from_content(self.model_name, answer)
        words_in, words_out = len(prompt.split()), len(answer.split())
        output.usage = ModelUsage(input_tokens=words_in, output_tokens=words_out, total_tokens=words_in + words_out)
        return output


@modelapi(name="almanac")
def almanac():  # type: ignore[no-untyped-def]
    return Almanac
