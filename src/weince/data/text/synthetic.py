"""Synthetic text data (embedded default; a pipeline check, *not* a result about STS-B).

:func:`generate_corpus` and :func:`generate_sts_pairs` build English sentences from a
small hand-written lexicon: eight topics (music, kitchen, sport, animals, street, office,
garden, weather-free outdoor scenes), each with subjects, actions (a verb with the objects
it takes) and details (a place or time phrase). Every word slot has a list of synonyms.
A *content* is a tuple ``(topic, subject, action verb, object, detail)``; a sentence renders
a content with one of five paraphrase templates (progressive, simple present, passive
progressive, passive, fronted detail) and optionally negated (three negated templates).

A pair's gold score is fixed by how its second content is derived from the first,
following the STS annotation scale:

====== ======================================================================================
gold   construction of sentence 2 from sentence 1's content
====== ======================================================================================
5      same subject, verb, object and detail; a *different* paraphrase template
4      same subject, verb and object; a different detail (an unimportant detail differs);
       one content word swapped for a listed synonym; any template
3      same subject and verb, a different object of that verb (important information differs)
2      exactly one of subject or object shared, the verb differs; same topic
1      same topic, no slot shared
0      a different topic
====== ======================================================================================

Negation: for levels 5, 4 and 3, a share ``neg_frac`` (default 0.15) of pairs negates
exactly one of the two sentences; such a pair's gold is ``level - 2`` (a contradiction of
the main claim lowers similarity but keeps shared content). So
``gold = level - 2 * negated``, recorded per pair in ``STSPairs.meta``. Levels are drawn
uniformly; everything is a deterministic function of ``seed`` (a ``random.Random``).
:func:`generate_corpus` draws random contents and templates (10% negated), deduplicated.
Every record produced from these functions carries ``synthetic=True``; tables must print it.
"""

from __future__ import annotations

import random
from dataclasses import dataclass
from typing import Any

import numpy as np

from weince.data.text.real import STSPairs

__all__ = ["generate_corpus", "generate_sts_pairs"]

# --------------------------------------------------------------------------- synthetic
# Each slot entry is a tuple of interchangeable phrasings (synonyms), canonical first.
# A verb phrasing is (base, third person, -ing, past participle).
_LEXICON: dict[str, dict[str, Any]] = {
    "music": {
        "subjects": [("a man", "a guy"), ("a woman", "a lady"), ("a young girl", "a little girl"),
                     ("the band", "the group"), ("an old musician", "an elderly musician")],
        "actions": [
            ((("play", "plays", "playing", "played"), ("strum", "strums", "strumming", "strummed")),
             [("a guitar",), ("an old guitar", "a worn guitar"), ("the violin", "the fiddle")]),
            ((("play", "plays", "playing", "played"),),
             [("the piano",), ("a drum", "a drum kit"), ("a flute",)]),
            ((("sing", "sings", "singing", "sung"), ("perform", "performs", "performing",
                                                    "performed")),
             [("a song", "a tune"), ("an old ballad", "an old folk song"), ("the anthem",)]),
            ((("tune", "tunes", "tuning", "tuned"), ("adjust", "adjusts", "adjusting",
                                                    "adjusted")),
             [("a guitar",), ("the piano",), ("the violin", "the fiddle")]),
        ],
        "details": [("on the stage", "on stage"), ("in a small bar", "in a little pub"),
                    ("at the concert", "at the show"), ("this evening", "tonight"),
                    ("in the studio",)],
    },
    "kitchen": {
        "subjects": [("a man", "a guy"), ("a woman", "a lady"), ("the chef", "the cook"),
                     ("a boy", "a young boy"), ("my grandmother", "my grandma")],
        "actions": [
            ((("cut", "cuts", "cutting", "cut"), ("slice", "slices", "slicing", "sliced")),
             [("an onion",), ("a tomato",), ("the bread", "the loaf"), ("a potato",)]),
            ((("cook", "cooks", "cooking", "cooked"), ("prepare", "prepares", "preparing",
                                                      "prepared")),
             [("some rice",), ("a large meal", "a big meal"), ("the soup",), ("pasta",)]),
            ((("peel", "peels", "peeling", "peeled"),),
             [("a potato",), ("an orange",), ("a banana",)]),
            ((("wash", "washes", "washing", "washed"), ("rinse", "rinses", "rinsing", "rinsed")),
             [("the dishes",), ("a pan", "a frying pan"), ("the vegetables", "the veggies")]),
        ],
        "details": [("in the kitchen",), ("for dinner", "for supper"),
                    ("at the restaurant", "at the diner"), ("this morning",), ("at home",)],
    },
    "sport": {
        "subjects": [("a soccer player", "a football player"), ("the boy", "the kid"),
                     ("a tall man", "a tall guy"), ("the team", "the squad"),
                     ("a woman", "a lady")],
        "actions": [
            ((("kick", "kicks", "kicking", "kicked"),),
             [("a ball",), ("the football", "the soccer ball")]),
            ((("throw", "throws", "throwing", "thrown"), ("toss", "tosses", "tossing",
                                                         "tossed")),
             [("a ball",), ("a frisbee",), ("the javelin", "a spear")]),
            ((("win", "wins", "winning", "won"),),
             [("the match", "the game"), ("a trophy", "a cup"), ("the race",)]),
            ((("ride", "rides", "riding", "ridden"),),
             [("a bicycle", "a bike"), ("a horse",), ("a skateboard",)]),
        ],
        "details": [("in the park",), ("on the field", "on the pitch"), ("at the stadium",),
                    ("on sunday", "at the weekend"), ("in the rain",)],
    },
    "animals": {
        "subjects": [("a dog", "a puppy"), ("the cat", "the kitten"), ("a brown horse",),
                     ("a small bird", "a little bird"), ("the monkey", "the ape")],
        "actions": [
            ((("chase", "chases", "chasing", "chased"), ("pursue", "pursues", "pursuing",
                                                        "pursued")),
             [("a ball",), ("a squirrel",), ("the mouse",)]),
            ((("eat", "eats", "eating", "eaten"), ("devour", "devours", "devouring",
                                                  "devoured")),
             [("some food",), ("a banana",), ("the seeds", "the grain")]),
            ((("carry", "carries", "carrying", "carried"),),
             [("a stick", "a branch"), ("a toy",), ("a ball",)]),
            ((("watch", "watches", "watching", "watched"), ("observe", "observes", "observing",
                                                           "observed")),
             [("the children", "the kids"), ("a fish",), ("the mouse",)]),
        ],
        "details": [("in the garden", "in the yard"), ("on the grass", "on the lawn"),
                    ("near the river", "by the river"), ("at the zoo",), ("at night",)],
    },
    "street": {
        "subjects": [("a man", "a guy"), ("a police officer", "a policeman"),
                     ("an old woman", "an elderly woman"), ("the driver",),
                     ("a group of tourists", "some tourists")],
        "actions": [
            ((("drive", "drives", "driving", "driven"),),
             [("a red car",), ("a bus",), ("the truck", "the lorry")]),
            ((("cross", "crosses", "crossing", "crossed"),),
             [("the street", "the road"), ("a bridge",), ("the square", "the plaza")]),
            ((("park", "parks", "parking", "parked"),),
             [("a red car",), ("the truck", "the lorry"), ("a motorcycle", "a motorbike")]),
            ((("photograph", "photographs", "photographing", "photographed"),
              ("shoot", "shoots", "shooting", "shot")),
             [("the old church",), ("a bridge",), ("the square", "the plaza")]),
        ],
        "details": [("in the city", "downtown"), ("near the station",), ("at noon", "at midday"),
                    ("in heavy traffic",), ("after work",)],
    },
    "office": {
        "subjects": [("the manager", "the boss"), ("a young woman", "a young lady"),
                     ("the committee", "the board"), ("an engineer",), ("the clerk",)],
        "actions": [
            ((("write", "writes", "writing", "written"), ("draft", "drafts", "drafting",
                                                         "drafted")),
             [("a report",), ("a letter",), ("the budget", "the financial plan")]),
            ((("read", "reads", "reading", "read"), ("review", "reviews", "reviewing",
                                                    "reviewed")),
             [("a report",), ("the contract", "the agreement"), ("the budget",
                                                                 "the financial plan")]),
            ((("sign", "signs", "signing", "signed"),),
             [("the contract", "the agreement"), ("a letter",), ("the form",)]),
            ((("fix", "fixes", "fixing", "fixed"), ("repair", "repairs", "repairing",
                                                   "repaired")),
             [("the printer",), ("a computer", "a laptop"), ("the phone",)]),
        ],
        "details": [("in the office",), ("at the meeting",), ("before lunch",),
                    ("on monday",), ("at the bank",)],
    },
    "garden": {
        "subjects": [("a gardener",), ("the old man", "the elderly man"), ("a girl", "a lass"),
                     ("my neighbour", "my neighbor"), ("the farmer",)],
        "actions": [
            ((("plant", "plants", "planting", "planted"), ("sow", "sows", "sowing", "sown")),
             [("some flowers",), ("a tree",), ("the seeds", "the grain")]),
            ((("water", "waters", "watering", "watered"),),
             [("some flowers",), ("the lawn", "the grass"), ("a tree",)]),
            ((("cut", "cuts", "cutting", "cut"), ("trim", "trims", "trimming", "trimmed")),
             [("the hedge", "the bushes"), ("the lawn", "the grass"), ("a branch",)]),
            ((("pick", "picks", "picking", "picked"), ("gather", "gathers", "gathering",
                                                      "gathered")),
             [("some apples",), ("the strawberries",), ("some flowers",)]),
        ],
        "details": [("in the garden", "in the yard"), ("in spring",), ("behind the house",),
                    ("in the morning", "early in the day"), ("on the farm",)],
    },
    "outdoors": {
        "subjects": [("a hiker", "a walker"), ("two children", "two kids"),
                     ("a young couple",), ("the climber",), ("a fisherman",)],
        "actions": [
            ((("climb", "climbs", "climbing", "climbed"), ("scale", "scales", "scaling",
                                                          "scaled")),
             [("a mountain",), ("a steep hill",), ("the rock", "the cliff")]),
            ((("catch", "catches", "catching", "caught"),),
             [("a fish",), ("a big trout", "a large trout"), ("a crab",)]),
            ((("build", "builds", "building", "built"),),
             [("a sandcastle",), ("a fire", "a campfire"), ("a small hut", "a little hut")]),
            ((("explore", "explores", "exploring", "explored"),),
             [("the forest", "the woods"), ("a cave",), ("the beach", "the shore")]),
        ],
        "details": [("near the lake",), ("on the beach", "on the shore"),
                    ("in the mountains",), ("at sunset", "at dusk"), ("during the holiday",)],
    },
}
_TOPICS = sorted(_LEXICON)

# paraphrase templates: S subject, O object, D detail (Dc capitalised), verb forms;
# {beS}/{beO}/{doS} agree in number with the subject/object, {verbS} is the present form
_TEMPLATES = (
    "{S} {beS} {ing} {O} {D}.",
    "{S} {verbS} {O} {D}.",
    "{O} {beO} being {pp} by {S} {D}.",
    "{O} {beO} {pp} by {S} {D}.",
    "{Dc}, {S} {beS} {ing} {O}.",
)
_NEG_TEMPLATES = (
    "{S} {beS} not {ing} {O} {D}.",
    "{S} {doS} not {base} {O} {D}.",
    "{Dc}, {O} {beO} not being {pp} by {S}.",
)
_PLURAL = {"two children", "two kids", "some tourists", "the children", "the kids",
           "the seeds", "the dishes", "the vegetables", "the veggies", "some flowers",
           "some apples", "the strawberries", "the bushes"}


@dataclass(frozen=True)
class _Content:
    topic: str
    subj: int
    action: int
    obj: int  # index into the action's object list
    detail: int


def _pick(rng: random.Random, n: int, exclude: int | None = None) -> int:
    choices = [i for i in range(n) if i != exclude]
    return rng.choice(choices)


def _render(c: _Content, rng: random.Random, *, template: int, negated: bool,
            syn: dict[str, int] | None = None) -> str:
    """Render a content; ``syn`` maps slot -> synonym index (default: canonical)."""
    lex = _LEXICON[c.topic]
    syn = syn or {}
    verbs, objects = lex["actions"][c.action]
    subj_alts = lex["subjects"][c.subj]
    obj_alts = objects[c.obj]
    det_alts = lex["details"][c.detail]
    S = subj_alts[syn.get("subj", 0) % len(subj_alts)]
    O = obj_alts[syn.get("obj", 0) % len(obj_alts)]  # noqa: E741 - the template's {O}
    D = det_alts[syn.get("detail", 0) % len(det_alts)]
    base, third, ing, pp = verbs[syn.get("verb", 0) % len(verbs)]
    tpl = (_NEG_TEMPLATES if negated else _TEMPLATES)[template]
    s_pl, o_pl = S in _PLURAL, O in _PLURAL
    text = tpl.format(S=S, O=O, D=D, Dc=D[:1].upper() + D[1:], base=base, ing=ing, pp=pp,
                      verbS=base if s_pl else third, beS="are" if s_pl else "is",
                      beO="are" if o_pl else "is", doS="do" if s_pl else "does")
    return text[:1].upper() + text[1:]


def _random_content(rng: random.Random, topic: str | None = None) -> _Content:
    topic = topic or rng.choice(_TOPICS)
    lex = _LEXICON[topic]
    action = rng.randrange(len(lex["actions"]))
    return _Content(topic, rng.randrange(len(lex["subjects"])), action,
                    rng.randrange(len(lex["actions"][action][1])),
                    rng.randrange(len(lex["details"])))


def _random_syn(rng: random.Random) -> dict[str, int]:
    return {k: rng.randrange(2) for k in ("subj", "obj", "detail", "verb")}


def generate_corpus(n_sentences: int, seed: int = 0, neg_frac: float = 0.10) -> list[str]:
    """``n_sentences`` distinct synthetic English sentences (see the module docstring).

    Deterministic for ``seed``. Raises ``ValueError`` if ``n_sentences`` is not positive
    or exceeds what the lexicon can make distinct (about 50,000).
    """
    if n_sentences < 1:
        raise ValueError(f"n_sentences must be positive, got {n_sentences}")
    if not 0.0 <= neg_frac <= 1.0:
        raise ValueError(f"neg_frac must be in [0, 1], got {neg_frac}")
    rng = random.Random(seed)
    seen: set[str] = set()
    out: list[str] = []
    attempts = 0
    while len(out) < n_sentences:
        attempts += 1
        if attempts > 20 * n_sentences + 1000:
            raise ValueError(f"could not make {n_sentences} distinct synthetic sentences "
                             f"(made {len(out)}); ask for fewer")
        c = _random_content(rng)
        negated = rng.random() < neg_frac
        tpl = rng.randrange(len(_NEG_TEMPLATES if negated else _TEMPLATES))
        s = _render(c, rng, template=tpl, negated=negated, syn=_random_syn(rng))
        if s not in seen:
            seen.add(s)
            out.append(s)
    return out


def _derive(rng: random.Random, c: _Content, level: int) -> _Content:
    """Second content of a pair at a given construction level (module docstring table)."""
    lex = _LEXICON[c.topic]
    n_subj, n_act, n_det = len(lex["subjects"]), len(lex["actions"]), len(lex["details"])
    if level in (5, 4):
        detail = c.detail if level == 5 else _pick(rng, n_det, c.detail)
        return _Content(c.topic, c.subj, c.action, c.obj, detail)
    if level == 3:
        objects = lex["actions"][c.action][1]
        return _Content(c.topic, c.subj, c.action, _pick(rng, len(objects), c.obj),
                        _pick(rng, n_det, c.detail))
    verb_words = _verb_words(c.topic, c.action)
    other_actions = [a for a in range(n_act) if not (_verb_words(c.topic, a) & verb_words)]
    action = rng.choice(other_actions)
    objects = lex["actions"][action][1]
    obj_words = _obj_words(c.topic, c.action, c.obj)
    same_obj = [i for i, o in enumerate(objects) if set(o) & obj_words]
    diff_obj = [i for i, o in enumerate(objects) if not set(o) & obj_words]
    if level == 2:
        if same_obj and rng.random() < 0.5:  # share the object, change the subject
            return _Content(c.topic, _pick(rng, n_subj, c.subj), action, rng.choice(same_obj),
                            _pick(rng, n_det, c.detail))
        return _Content(c.topic, c.subj, action, rng.choice(diff_obj),
                        _pick(rng, n_det, c.detail))
    if level == 1:
        return _Content(c.topic, _pick(rng, n_subj, c.subj), action, rng.choice(diff_obj),
                        _pick(rng, n_det, c.detail))
    if level == 0:  # another topic, and no subject, verb or object phrase in common
        while True:
            d = _random_content(rng, rng.choice([t for t in _TOPICS if t != c.topic]))
            if not (_phrases(d) & _phrases(c)):
                return d
    raise ValueError(f"level must be an integer 0-5, got {level}")


def _phrases(c: _Content) -> set[str]:
    lex = _LEXICON[c.topic]
    verbs, objects = lex["actions"][c.action]
    return set(lex["subjects"][c.subj]) | {v[0] for v in verbs} | set(objects[c.obj])


def _shared_slots(c1: _Content, c2: _Content) -> list[str]:
    """Slots two contents have in common (a synonym counts as the same phrase)."""
    l1, l2 = _LEXICON[c1.topic], _LEXICON[c2.topic]
    v1, o1 = l1["actions"][c1.action]
    v2, o2 = l2["actions"][c2.action]
    same = {
        "topic": c1.topic == c2.topic,
        "subject": bool(set(l1["subjects"][c1.subj]) & set(l2["subjects"][c2.subj])),
        "verb": bool({v[0] for v in v1} & {v[0] for v in v2}),
        "object": bool(set(o1[c1.obj]) & set(o2[c2.obj])),
        "detail": bool(set(l1["details"][c1.detail]) & set(l2["details"][c2.detail])),
    }
    return [k for k, v in same.items() if v]


def _swappable(c: _Content) -> list[str]:
    """Slots of a content whose phrase has a listed synonym."""
    lex = _LEXICON[c.topic]
    verbs, objects = lex["actions"][c.action]
    have = {"subj": len(lex["subjects"][c.subj]), "verb": len(verbs), "obj": len(objects[c.obj])}
    return [k for k, n in have.items() if n > 1]


def _verb_words(topic: str, action: int) -> set[str]:
    return {v[0] for v in _LEXICON[topic]["actions"][action][0]}


def _obj_words(topic: str, action: int, obj: int) -> set[str]:
    return set(_LEXICON[topic]["actions"][action][1][obj])


def generate_sts_pairs(n: int, seed: int = 0, neg_frac: float = 0.15) -> STSPairs:
    """``n`` synthetic sentence pairs with gold scores 0-5 (construction in the module
    docstring): ``gold = level - 2 * negated``. Deterministic for ``seed``.

    Returns:
        :class:`STSPairs` with ``synthetic=True`` and ``meta[i] = {"level", "negated",
        "topic", "shared"}`` (``shared``: the slots of topic, subject, verb, object and detail
        the two contents have in common).
    """
    if n < 1:
        raise ValueError(f"n must be positive, got {n}")
    if not 0.0 <= neg_frac <= 1.0:
        raise ValueError(f"neg_frac must be in [0, 1], got {neg_frac}")
    rng = random.Random(seed)
    s1, s2, gold, meta = [], [], [], []
    for _ in range(n):
        level = rng.randrange(6)
        c1 = _random_content(rng)
        c2 = _derive(rng, c1, level)
        negated = level >= 3 and rng.random() < neg_frac
        neg_side = rng.randrange(2) if negated else -1
        t1 = rng.randrange(len(_NEG_TEMPLATES if neg_side == 0 else _TEMPLATES))
        if level == 5:  # a different paraphrase template, canonical wording both sides
            syn1 = syn2 = {}
            n2 = len(_NEG_TEMPLATES if neg_side == 1 else _TEMPLATES)
            t2 = _pick(rng, n2, t1 if neg_side == -1 else None)
        else:
            syn1 = _random_syn(rng)
            syn2 = dict(syn1)
            if level == 4:  # one content word swapped for a synonym, where one is listed
                slots = _swappable(c1)
                if slots:
                    slot = rng.choice(slots)
                    syn2[slot] = 1 - syn1[slot]
            t2 = rng.randrange(len(_NEG_TEMPLATES if neg_side == 1 else _TEMPLATES))
        a = _render(c1, rng, template=t1, negated=neg_side == 0, syn=syn1)
        b = _render(c2, rng, template=t2, negated=neg_side == 1, syn=syn2)
        s1.append(a)
        s2.append(b)
        gold.append(float(level - 2 * negated))
        meta.append({"level": level, "negated": bool(negated), "topic": c1.topic,
                     "shared": _shared_slots(c1, c2)})
    return STSPairs(s1, s2, np.array(gold), source=f"synthetic(seed={seed}, n={n})",
                    synthetic=True, meta=meta)
