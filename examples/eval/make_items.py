"""Write the cloze evaluation's frozen item set, examples/eval/items.jsonl.

Each item is a line of text with one blank ("___") and the options that may fill it; exactly
one option is right. Two groups, kept apart by the evaluation:

primary (300 items): sentences of the warm-up corpus's grammar (examples/warmup/make_data.py),
    drawn from a stream of the generator that neither split uses and never equal to a
    training sentence; 75 items of each kind:
    article    "a" or "an" before the next word (2 options)
    agreement  the present-tense verb agreeing with its subject, across any relative clause
               in between (2 options)
    noun       the noun of a noun phrase against three words of other classes, of about its
               length (4 options)
    verb       the past-tense verb against three words of other classes, of about its
               length (4 options)
breadth (120 items): spelling of common English words that never occur in the training text:
    the word against three misspellings (a swap of two neighbouring letters, a changed vowel,
    a doubled letter), the blank standing alone on its line (4 options). A
    different skill on words the models have not seen: where a better in-domain model
    generalises worse, this is where it shows.

    python3 examples/eval/make_items.py [--out examples/eval/items.jsonl]

Deterministic (``random.Random`` with integer seeds); the file is committed and a test holds
it equal to what this script writes. A line: {"id", "group", "kind", "text", "options",
"answer"} with ``answer`` the index of the right option.
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import random
import re
import sys
from pathlib import Path
from types import ModuleType

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
ITEMS_SEED = 31337
PER_KIND = 75
BLANK = "___"

# Common English words, none of them in the grammar's vocabulary (checked below against the
# training text, so a change of the grammar cannot silently leak one in).
BREADTH_TEXT = """
about above accept across action advice afraid against agree almost already always amount
animal answer anyone appear arrive attack autumn balance battle beauty become before believe
better beyond blanket border bottle branch breath bright broken brother butter button camera
candle careful castle center chance change cheese chicken circle climb clothes cloud coffee
collect colour corner cotton country course cousin danger daughter decide deliver desert
dinner doctor double dragon dream driver during effort either enough escape evening famous
father feather finger flower follow forget friend future gentle glass golden ground guitar
happen health heart honey island jacket journey kettle kitchen ladder language listen little
machine middle minute moment monkey morning mother mountain museum needle number ocean office
pencil people pepper picture pillow planet pocket police potato problem purple question rabbit
reason record remember ribbon rocket saddle season second secret silver simple sister spider
spring square stone street strong summer sudden supper table thunder ticket tomato travel
turtle valley village violin visit wagon weather winter wonder yellow
"""
BREADTH_WORDS = BREADTH_TEXT.split()
VOWELS = "aeiou"


def grammar() -> ModuleType:
    """The warm-up corpus's generator, loaded from its file (examples/ is not a package)."""
    spec = importlib.util.spec_from_file_location("make_data", ROOT / "warmup" / "make_data.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses look their module up there
    spec.loader.exec_module(module)
    return module


def other_class_words(g: ModuleType) -> dict[str, list[str]]:
    """Single words of each class, for distractors that are real words in the wrong slot."""
    nouns = [w for pair in g.PEOPLE + g.ANIMALS + g.THINGS for w in pair if " " not in w]
    verbs = [w for triple in g.TRANSITIVE + g.INTRANSITIVE + g.SOCIAL for w in triple]
    adjectives = list(g.ADJECTIVES)
    prepositions = list(g.PREPOSITIONS)
    return {
        "noun": verbs + adjectives + prepositions,  # a noun's slot, filled with no noun
        "verb": nouns + adjectives + prepositions,
    }


def near_in_length(word: str, pool: list[str]) -> list[str]:
    """The pool's words within one letter of the word's length (widened until there are three).

    A sentence's likelihood falls with every letter, so a short distractor would win on
    length alone; matching lengths makes the item ask about the slot, not the letter count.
    """
    for slack in range(1, 20):
        near = sorted({w for w in pool if w != word and abs(len(w) - len(word)) <= slack})
        if len(near) >= 3:
            return near
    raise ValueError(f"no three distractors for {word!r}")


def misspellings(word: str, rng: random.Random, real: set[str]) -> list[str]:
    """Three distinct misspellings: a neighbour swap, a changed vowel, a doubled letter."""
    found: list[str] = []
    makers = [swap, change_vowel, double]
    while len(found) < 3:
        make = makers[len(found)]
        candidate = make(word, rng)
        if candidate and candidate != word and candidate not in real and candidate not in found:
            found.append(candidate)
    return found


def swap(word: str, rng: random.Random) -> str:
    i = rng.randrange(1, len(word) - 2) if len(word) > 3 else 0
    return word[:i] + word[i + 1] + word[i] + word[i + 2 :]


def change_vowel(word: str, rng: random.Random) -> str:
    places = [i for i, c in enumerate(word) if c in VOWELS]
    if not places:
        return swap(word, rng)
    i = rng.choice(places)
    return word[:i] + rng.choice([v for v in VOWELS if v != word[i]]) + word[i + 1 :]


def double(word: str, rng: random.Random) -> str:
    """One letter written twice (a dropped letter too often spells another real word)."""
    i = rng.randrange(1, len(word))
    return word[:i] + word[i] + word[i:]


def items() -> list[dict[str, object]]:
    g = grammar()
    training = set(g.corpus(g.TRAIN_SEED, g.TRAIN_BYTES).decode("ascii").splitlines())
    known = set(re.findall(r"[a-z]+", "\n".join(training).lower()))
    rng = random.Random(ITEMS_SEED)
    pools = other_class_words(g)
    wanted = ("article", "agreement", "noun", "verb")
    made: dict[str, list[dict[str, object]]] = {kind: [] for kind in wanted}
    while any(len(made[kind]) < PER_KIND for kind in wanted):
        words = g.sentence(rng)
        line = g.text(words)
        if line in training:
            continue
        slots = [i for i, w in enumerate(words) if w.kind in made and len(made[w.kind]) < PER_KIND]
        slots = [i for i in slots if " " not in words[i].text]  # one word per blank
        if not slots:
            continue
        i = rng.choice(slots)
        word = words[i]
        if word.kind in pools:
            distractors = rng.sample(near_in_length(word.text, pools[word.kind]), 3)
        else:
            distractors = list(word.wrong)
        options = [word.text, *distractors]
        rng.shuffle(options)
        blanked = [*(w.text for w in words[:i]), BLANK, *(w.text for w in words[i + 1 :])]
        made[word.kind].append(
            {
                "id": f"{word.kind}-{len(made[word.kind]) + 1:03d}",
                "group": "primary",
                "kind": word.kind,
                "text": " ".join(blanked),
                "options": options,
                "answer": options.index(word.text),
            }
        )
    breadth: list[dict[str, object]] = []
    unseen = [w for w in BREADTH_WORDS if w not in known]
    real = set(BREADTH_WORDS) | known
    for word in unseen[:120]:
        options = [word, *misspellings(word, rng, real)]
        rng.shuffle(options)
        breadth.append(
            {
                "id": f"spelling-{len(breadth) + 1:03d}",
                "group": "breadth",
                "kind": "spelling",
                "text": BLANK,
                "options": options,
                "answer": options.index(word),
            }
        )
    if len(breadth) < 120:
        raise SystemExit(f"make_items.py: only {len(breadth)} breadth words are unseen in training, need 120")
    return [item for kind in wanted for item in made[kind]] + breadth


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=HERE / "items.jsonl")
    args = parser.parse_args()
    lines = [json.dumps(item, sort_keys=True) + "\n" for item in items()]
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text("".join(lines), encoding="ascii")
    print(f"{args.out}: {len(lines)} items")


if __name__ == "__main__":
    main()
