"""Write the breadth evaluation's items, examples/breadth/items.jsonl: 600 fresh spelling items.

The cloze evaluation (examples/eval/) kept 120 breadth items apart from its grammar items:
spelling of common English words that never occur in the training text, each word against
three misspellings, the blank alone on its line. Its trigram scored lower than its bigram on
them in every seed, but so few items told the two models apart that the cost was not
resolved. These are more items of the same kind, for that question alone:

- 600 words drawn (``random.Random`` with an integer seed) from the common English words
  below, every one of them absent from the training text (examples/warmup/data/train.txt,
  where the models learn) and from every item of the cloze evaluation, breadth and primary,
  text and options: no word of an old item is the answer, or a misspelling, of a new one;
- each word against three misspellings, one of each kind the old items use: two neighbouring
  letters swapped inside the word (the first and last letters stay), one vowel changed to
  another, one letter (not the first) written twice; a misspelling is never a word of the
  list, of the training text or of an old item, nor one of the real words below that the
  rules were found to make;
- the options in an order the seed shuffles; the items in the order they were drawn, so the
  first few of the file are a sample of the whole, not of one letter.

    python3 examples/breadth/make_items.py [--out examples/breadth/items.jsonl]

The file is committed, and tests/examples/test_harnesses.py holds it equal to what this script
writes. A line: {"id", "group": "breadth", "kind": "spelling", "text": "___", "options",
"answer"}, ``answer`` the index of the right option: the format of examples/eval/items.jsonl.
"""

from __future__ import annotations

import argparse
import json
import random
import re
from pathlib import Path

HERE = Path(__file__).resolve().parent
EXAMPLES = HERE.parent
TRAIN = EXAMPLES / "warmup" / "data" / "train.txt"
OLD_ITEMS = EXAMPLES / "eval" / "items.jsonl"
ITEMS_SEED = 20261203
COUNT = 600  # five times the cloze evaluation's 120
BLANK = "___"
VOWELS = "aeiou"
TRIES = 1000  # per misspelling; a word that yields none in that many is a mistake of the list

# Common English words of four to nine letters, each with a vowel and two different letters
# inside. None is in the training text or in an old item (checked below, so an edit of this
# list cannot leak one in).
WORDS_TEXT = """
absent accident account acid actor address admire adult advance adventure affair afford agent
airport alarm album alive allow alone amazing ankle announce annual anxious apart apology appeal
approve apron arch argue armchair army arrange arrow article ashamed asleep assist athlete
attempt attend author avoid awake award aware awful badge bakery balcony ballet balloon bamboo
banana bandage banner barber bargain barrel basin bathroom beach beard beast bedroom beetle
beggar begin behave belong bench berry bicycle biscuit bitter blade blame bleed blend bless
blind blink block blossom blouse blunt board bonnet borrow bother bounce bowl bracelet brain
brake brave breeze brick bride brief broom bubble bucket budget buffalo build bullet bundle
burden burst cabbage cabin cable cactus cage calendar camel canal canoe canvas captain carpet
carrot cartoon cattle cause ceiling cellar cement cereal certain chain chalk champion channel
chapter charge charm cheap cheek cheer cherry chest chimney chin choice choose chorus church
cinema citizen claim clap clay clean clerk cliff climate clock closet clown coach coast cocoa
collar college comb comfort common compass complain concert copper costume cottage cough council
count courage crab cradle crane crash crayon cream credit crew cricket crisp crowd crown crumb
crust crystal cupboard curious curtain cushion custom dairy damage dance dare darkness dentist
depth describe desk dessert detail diamond diary differ digital dirty discover dish distance
divide dizzy donkey doubt dozen drawer drawing dress drink drum dust duty earth echo edge elbow
election electric emperor empire energy engine entrance envelope equal error event exact exam
excuse exercise exit expert explain fabric factory fairy faith false family fancy farewell
fashion fault favour fence festival fever fiction field fierce figure film final finish flame
flash flavour fleet flight float flood floor flour fluid focus foggy folder forehead foreign
fork former fortune fountain frame freedom freeze fresh fridge frost frozen fruit fuel funny
furnace furniture gallery gamble garage garlic gather giant ginger giraffe glove glue goat grain
grape grass grateful gravel gravy grief grocer guard guess guest guide guilty habit hammer
handle harvest hatch hawk hazard helmet hero hobby hockey holiday hollow honour horizon hospital
hotel huge humble hunger hunter hurdle husband iceberg idea image impact income infant injury
insect invent iron ivory jealous jelly jewel joke judge juice jungle justice kangaroo kidney
kind king kingdom kite knee knock label labour lace lake lamb lantern lawn lawyer layer leader
leaf lecture legend lemon lesson level liberty library limit linen liquid lizard lobster local
lock lonely lumber lunch magic magnet maid mammal manner marble margin marriage mask master
meadow medal melody melon member memory mercy message metal method midnight mild milk mirror
misery mistake mixture model modest money motor mouth muscle music mustard mystery napkin narrow
nation native nature neighbour nephew nerve nest noble noise normal notice novel nurse object
observe occur offer olive onion opinion orbit organ ostrich oven owner oxygen oyster paddle
palace panic paper parade parcel parent parrot partner passage pastry patch patient pattern
peace peach peanut pearl pebble pedal penny person petrol phone piano pickle pigeon pilot pirate
pizza plain plastic plate plenty plum poem poison polite pond porch portrait powder praise
prayer prince printer prison private prize proud public pudding puddle pumpkin punish puppet
puppy puzzle quarrel quarter queen quick quilt rabbit racket radio raft rainbow raisin rapid
razor reader reason receipt recipe record remember reply rescue result reward ribbon riddle ripe
rival robin robot rocket rope rough royal rubber rumour rusty sack saddle sadness safety salad
salmon sample sandal sauce saucer sausage scale scarf scissors scout scream screen search season
second secret senior sentence servant settle shadow shallow shampoo shelf shell shelter shield
shirt shiver shoulder shovel shower shrimp sign silence silk silver simple sister sketch skill
skirt slipper slope smile smoke snail sneeze soap soccer sock soldier solid solve sorrow soup
space spare speech spell spider spinach spirit splash sponge spoon sport spring square stable
stage stairs stamp statue steam steel steep stomach stone storm story stove straw street stripe
strong student studio subject success sudden sugar suitcase summer sunset supply surface
surprise swallow sweater swing sword table tailor talent target taste teapot temple tennis tent
thirst thread throat thumb thunder ticket tiger timber toast toilet tomato tongue tooth torch
towel tower track tractor trade traffic tragedy travel treasure trick trolley trophy trouble
truck trumpet trunk trust tulip tunnel turtle twig uniform unit upset useful valley vase velvet
verse vessel victory video village vinegar violin visit voice volcano vote voyage wagon waiter
wallet walnut wander warm warning wealth weather wedding weekend weight whale wheat wheel
whisper whistle widow width wife wild wire wisdom witness wizard wolf wonder wooden worry wrist
writer yacht yard yawn yellow youth zebra zero
"""
WORDS = WORDS_TEXT.split()

# Real English words that the misspelling rules made from words of the list above, found by
# reading the output against a dictionary (Debian's wbritish and wamerican) until none was
# left: a distractor that is itself a word would make its item ask two questions. Only the
# answer is drawn from the list; these are never offered.
ALSO_REAL_TEXT = """
aline anion barrow bather bawl beech behove bland blank blent blond blued boast bondage budge
clack clam cluck coiling couch crest crib crush curst dash disk drunk dusk even fanny feel filed
finny firmer fiver flesh flush frieze gripe grovel hitch hubby jolly knack lack lick like limber
loin lumbar meld mister modal notion ovoid parch parson peddle pend peppy petrel poppy prance
quack shaver sick sliver soled solider solver spice spire sprang sprung stave stomp stump suck
sulk sward sweeter threat tint union volley waggon ware wheal wore worm
"""
ALSO_REAL = ALSO_REAL_TEXT.split()


def words_of(text: str) -> set[str]:
    return set(re.findall(r"[a-z]+", text.lower()))


def old_item_words(path: Path) -> set[str]:
    """Every word of every item of the cloze evaluation: its text and all its options."""
    found: set[str] = set()
    for line in path.read_text(encoding="utf-8").splitlines():
        item = json.loads(line)
        found |= words_of(" ".join([item["text"], *item["options"]]))
    return found


def swap_inside(word: str, rng: random.Random) -> str:
    """Two neighbouring letters exchanged, the first and the last letter left in place."""
    i = rng.randrange(1, len(word) - 2)
    return word[:i] + word[i + 1] + word[i] + word[i + 2 :]


def other_vowel(word: str, rng: random.Random) -> str:
    """One vowel replaced by another."""
    i = rng.choice([i for i, letter in enumerate(word) if letter in VOWELS])
    return word[:i] + rng.choice(VOWELS.replace(word[i], "")) + word[i + 1 :]


def doubled(word: str, rng: random.Random) -> str:
    """One letter after the first written twice (a dropped letter too often spells a real word)."""
    i = rng.randrange(1, len(word))
    return word[:i] + word[i] + word[i:]


def misspellings(word: str, rng: random.Random, real: set[str]) -> list[str]:
    """One misspelling of each kind, distinct from each other and from every real word."""
    found: list[str] = []
    for make in (swap_inside, other_vowel, doubled):
        for _ in range(TRIES):
            candidate = make(word, rng)
            if candidate not in real and candidate not in found:
                found.append(candidate)
                break
        else:
            raise SystemExit(f"make_items.py: no {make.__name__} misspelling of {word!r}")
    return found


def items(train: Path = TRAIN, old_items: Path = OLD_ITEMS) -> list[dict[str, object]]:
    known = words_of(train.read_text(encoding="ascii"))
    old = old_item_words(old_items)
    if len(set(WORDS)) != len(WORDS):
        raise SystemExit("make_items.py: a word is listed twice")
    leaked = sorted(set(WORDS) & (known | old))
    if leaked:
        raise SystemExit(f"make_items.py: in the training text or an old item: {', '.join(leaked)}")
    for word in WORDS:
        if not (len(word) >= 4 and word.isascii() and word.isalpha() and word.islower()):
            raise SystemExit(f"make_items.py: {word!r} is not four or more lowercase ASCII letters")
        if not set(word) & set(VOWELS) or len(set(word[1:-1])) < 2:
            raise SystemExit(f"make_items.py: {word!r} has no vowel to change or no letters inside to swap")
    rng = random.Random(ITEMS_SEED)
    real = set(WORDS) | set(ALSO_REAL) | known | old
    made: list[dict[str, object]] = []
    for number, word in enumerate(rng.sample(sorted(WORDS), COUNT), start=1):
        options = [word, *misspellings(word, rng, real)]
        rng.shuffle(options)
        made.append(
            {
                "id": f"breadth-{number:03d}",
                "group": "breadth",
                "kind": "spelling",
                "text": BLANK,
                "options": options,
                "answer": options.index(word),
            }
        )
    return made


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
