"""Synthetic documents for the offline QA tasks: the stand-ins for SQuAD (qa_1) and HotpotQA (qa_2) passages."""

from __future__ import annotations

import random
import re

from .words import nouns

_SYL = ("ka", "lo", "ri", "ven", "tor", "mi", "sa", "del", "ur", "bel", "an", "que", "zo", "fen", "pra",
        "gil", "mon", "tes", "ha", "nor", "vi", "cas", "ol", "dre")
_KINDS = ("museum", "brewery", "observatory", "library", "shipyard", "orchestra", "laboratory", "bakery",
          "theatre", "foundry", "academy", "garden", "railway", "market", "monastery")


def invented_name(rng: random.Random, parts: int) -> str:
    """A pronounceable made-up name of ``parts`` syllables (no real place or person)."""
    return "".join(rng.choice(_SYL) for _ in range(parts)).capitalize()


def entity(rng: random.Random) -> dict[str, str]:
    """An invented institution: its name, city, founding year, founder and what it is known for."""
    return {"name": f"{invented_name(rng, 3)} {rng.choice(_KINDS).capitalize()}", "city": invented_name(rng, 2),
            "year": str(rng.randint(1450, 1990)), "founder": f"{invented_name(rng, 2)} {invented_name(rng, 3)}",
            "product": rng.choice(nouns())}


def entity_doc(e: dict[str, str]) -> str:
    """The passage about an ``entity`` (``ENTITY_DOC`` reads its fields back)."""
    return (f"The {e['name']} is an institution in the city of {e['city']}. It was established in "
            f"{e['year']} by {e['founder']}. Today the {e['name']} is best known for its {e['product']}, "
            f"which visitors from far away come to see.")


def person_doc(person: str, city: str, year: str, rng: random.Random) -> str:
    """The passage about a founder (qa_2's second hop: where the founder was born)."""
    return (f"{person} was born in {city} in {year}. {person.split()[0]} studied {rng.choice(nouns())} "
            f"and later worked as a {rng.choice(nouns())} merchant before founding several institutions.")


# the fields of an entity_doc, read back from the text (training asks about every document of a context)
ENTITY_DOC = re.compile(r"The ([\w ]+?) is an institution in the city of (\w+)\. It was established in (\d+) by "
                        r"([\w ]+?)\. Today the [\w ]+? is best known for its ([\w ]+?),")

QA1_QUESTIONS = (("city", "In which city is the {name}?"), ("year", "In what year was the {name} established?"),
                  ("founder", "Who established the {name}?"), ("product", "What is the {name} best known for?"))
