"""Write the warm-up experiment's text corpus: a train split and a held-out split.

The text is generated, offline and deterministically, from a small probabilistic grammar of
English with a real vocabulary: noun phrases with articles that agree with the next sound
(a/an), adjectives, numbers, relative clauses, prepositional phrases, present tense with
subject-verb agreement and irregular past forms. A byte-level model has real structure to
learn (spelling, word order, agreement), and the held-out split holds sentences drawn from
the same grammar with a different stream of the generator, so it measures generalisation,
not recall.

    python3 examples/warmup/make_data.py [--out examples/warmup/data]

The output is byte for byte the same on every run and every Python 3.11+ (``random.Random``
with an integer seed, ``random()`` and ``choice`` only); the files are committed, and a test
(tests/examples/test_harnesses.py) holds them equal to what this script writes.

The grammar is also read by examples/eval/make_items.py: ``sentence()`` returns the words
with, for some of them, the forms that would be wrong in that slot.
"""

from __future__ import annotations

import argparse
import random
from dataclasses import dataclass, field
from pathlib import Path

TRAIN_BYTES = 64 * 1024
HELDOUT_BYTES = 8 * 1024
TRAIN_SEED = 20261202
HELDOUT_SEED = 7

# noun: (singular, plural)
PEOPLE = [
    ("farmer", "farmers"),
    ("baker", "bakers"),
    ("miller", "millers"),
    ("teacher", "teachers"),
    ("doctor", "doctors"),
    ("sailor", "sailors"),
    ("child", "children"),
    ("woman", "women"),
    ("man", "men"),
    ("uncle", "uncles"),
    ("aunt", "aunts"),
    ("engineer", "engineers"),
    ("artist", "artists"),
    ("officer", "officers"),
]
ANIMALS = [
    ("dog", "dogs"),
    ("cat", "cats"),
    ("horse", "horses"),
    ("owl", "owls"),
    ("eagle", "eagles"),
    ("fox", "foxes"),
    ("goose", "geese"),
    ("mouse", "mice"),
    ("ox", "oxen"),
    ("elephant", "elephants"),
]
THINGS = [
    ("apple", "apples"),
    ("loaf of bread", "loaves of bread"),
    ("letter", "letters"),
    ("basket", "baskets"),
    ("lamp", "lamps"),
    ("boat", "boats"),
    ("book", "books"),
    ("coin", "coins"),
    ("umbrella", "umbrellas"),
    ("key", "keys"),
    ("box", "boxes"),
    ("knife", "knives"),
    ("orange", "oranges"),
    ("egg", "eggs"),
    ("map", "maps"),
    ("ink bottle", "ink bottles"),
]
PLACES = [
    "the garden",
    "the river",
    "the market",
    "the bridge",
    "the window",
    "the old mill",
    "the harbour",
    "the school",
    "the orchard",
    "the station",
    "the inn",
    "the forest",
    "the hill",
    "the kitchen",
]
PREPOSITIONS = ["in", "near", "at", "under", "by", "behind", "beside", "across", "inside", "outside"]
TIMES = [
    "in the morning",
    "in the evening",
    "at night",
    "every day",
    "before dawn",
    "after supper",
    "on sunday",
    "in the winter",
    "at noon",
    "once a week",
]
ADJECTIVES = [
    "old",
    "young",
    "quiet",
    "red",
    "small",
    "tall",
    "honest",
    "angry",
    "empty",
    "early",
    "heavy",
    "orange",
    "ugly",
    "unusual",
    "brown",
    "clever",
    "tired",
    "ancient",
    "invisible",
    "eager",
]
NUMBERS = ["two", "three", "four", "five", "seven", "eleven", "many", "some", "few"]
# verb: (third person singular, plural/base, past)
TRANSITIVE = [
    ("sees", "see", "saw"),
    ("carries", "carry", "carried"),
    ("finds", "find", "found"),
    ("sells", "sell", "sold"),
    ("paints", "paint", "painted"),
    ("watches", "watch", "watched"),
    ("opens", "open", "opened"),
    ("buys", "buy", "bought"),
    ("hides", "hide", "hid"),
    ("brings", "bring", "brought"),
    ("takes", "take", "took"),
    ("drops", "drop", "dropped"),
]
INTRANSITIVE = [
    ("sleeps", "sleep", "slept"),
    ("sings", "sing", "sang"),
    ("waits", "wait", "waited"),
    ("laughs", "laugh", "laughed"),
    ("runs", "run", "ran"),
    ("works", "work", "worked"),
    ("rests", "rest", "rested"),
    ("hurries", "hurry", "hurried"),
]
# subject verbs that take a person or animal as their object only
SOCIAL = [
    ("greets", "greet", "greeted"),
    ("follows", "follow", "followed"),
    ("helps", "help", "helped"),
    ("thanks", "thank", "thanked"),
]
CONNECTIVES = ["because", "while", "but", "and", "although", "so"]


@dataclass
class Word:
    """One word (or fixed phrase) of a sentence; ``wrong`` are forms that would be wrong here."""

    text: str
    kind: str = ""  # "" when no item can be made on this word
    wrong: list[str] = field(default_factory=list)


def article(next_word: str) -> str:
    return "an" if next_word[0] in "aeiou" else "a"


def noun_phrase(rng: random.Random, nouns: list[tuple[str, str]], plural: bool) -> list[Word]:
    """Determiner, perhaps an adjective, the noun; perhaps a relative clause after it."""
    singular, many = rng.choice(nouns)
    noun = many if plural else singular
    words: list[Word] = []
    adjective = rng.choice(ADJECTIVES) if rng.random() < 0.4 else None
    first = adjective or noun
    if plural:
        det = "the" if rng.random() < 0.5 else rng.choice(NUMBERS)
        words.append(Word(det))
    else:
        r = rng.random()
        if r < 0.45:
            words.append(Word("the"))
        elif r < 0.9:
            right = article(first)
            words.append(Word(right, "article", ["an" if right == "a" else "a"]))
        else:
            words.append(Word(rng.choice(["this", "my", "every", "her", "his"])))
    if adjective:
        words.append(Word(adjective))
    words.append(Word(noun, "noun", []))
    return words


def verb(rng: random.Random, verbs: list[tuple[str, str, str]], plural: bool, past: bool) -> Word:
    third, base, past_form = rng.choice(verbs)
    if past:
        return Word(past_form, "verb")
    right, wrong = (base, third) if plural else (third, base)
    return Word(right, "agreement", [wrong])


def clause(rng: random.Random, past: bool) -> list[Word]:
    """Subject, optional relative clause, verb, object or not, place or not."""
    plural = rng.random() < 0.4
    subject_nouns = PEOPLE if rng.random() < 0.7 else ANIMALS
    words = noun_phrase(rng, subject_nouns, plural)
    if rng.random() < 0.25:  # a relative clause between the subject and its verb
        inner_plural = rng.random() < 0.4
        words.append(Word("who" if subject_nouns is PEOPLE else "that"))
        if rng.random() < 0.5:
            words.append(verb(rng, INTRANSITIVE, plural, past))
            words.append(Word(f"{rng.choice(PREPOSITIONS)} {rng.choice(PLACES)}"))
        else:
            words.append(verb(rng, TRANSITIVE, plural, past))
            words.extend(noun_phrase(rng, THINGS, inner_plural))
    r = rng.random()
    if r < 0.5:
        words.append(verb(rng, TRANSITIVE, plural, past))
        words.extend(noun_phrase(rng, THINGS, rng.random() < 0.4))
    elif r < 0.7:
        words.append(verb(rng, SOCIAL, plural, past))
        words.extend(noun_phrase(rng, PEOPLE + ANIMALS, rng.random() < 0.4))
    else:
        words.append(verb(rng, INTRANSITIVE, plural, past))
    if rng.random() < 0.5:
        words.append(Word(f"{rng.choice(PREPOSITIONS)} {rng.choice(PLACES)}"))
    return words


def sentence(rng: random.Random) -> list[Word]:
    """One sentence: a clause, perhaps a time, perhaps a second clause; ends with a full stop."""
    past = rng.random() < 0.4
    words: list[Word] = []
    if rng.random() < 0.2:
        time = rng.choice(TIMES)
        words.append(Word(time[0].upper() + time[1:] + ","))
        words.extend(clause(rng, past))
    else:
        first = clause(rng, past)
        first[0] = Word(first[0].text[0].upper() + first[0].text[1:], "", [])  # no item on a capital
        words.extend(first)
        if rng.random() < 0.3:
            words.append(Word(rng.choice(TIMES)))
    if rng.random() < 0.3:
        words[-1] = Word(words[-1].text + ",", "", [])
        words.append(Word(rng.choice(CONNECTIVES)))
        words.extend(clause(rng, past if rng.random() < 0.8 else not past))
    words[-1] = Word(words[-1].text + ".", "", [])
    return words


def text(words: list[Word]) -> str:
    return " ".join(w.text for w in words)


def corpus(seed: int, nbytes: int) -> bytes:
    """Whole sentences, one per line, until ``nbytes`` would be passed; ASCII."""
    rng = random.Random(seed)
    lines: list[str] = []
    size = 0
    while True:
        line = text(sentence(rng)) + "\n"
        if size + len(line) > nbytes:
            break
        lines.append(line)
        size += len(line)
    return "".join(lines).encode("ascii")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=Path(__file__).resolve().parent / "data")
    args = parser.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)
    for name, seed, nbytes in (("train.txt", TRAIN_SEED, TRAIN_BYTES), ("heldout.txt", HELDOUT_SEED, HELDOUT_BYTES)):
        data = corpus(seed, nbytes)
        (args.out / name).write_bytes(data)
        sentences = data.count(b"\n")
        print(f"{args.out / name}: {len(data)} bytes, {sentences} sentences")


if __name__ == "__main__":
    main()
