"""Ten correction sequences for the update benchmark: an earlier fact, restated, then
corrected in a later session (and the correction restated), next to facts that stay
true. Each message carries the extraction a careful extractor would supply for it,
with its decision: these are test fixtures written by hand, the expected outcome is
derived from them by code (lab/bench/update.py)."""

from __future__ import annotations

from typing import Any

Rel = dict[str, Any]


def rel(subject: str, predicate: str, obj: str, fact: str, decision: str) -> Rel:
    return {"subject": subject, "predicate": predicate, "object": obj, "fact": fact, "decision": decision}


# name -> sessions -> messages (speaker, text, relations)
SEQUENCES: dict[str, list[list[tuple[str, str, list[Rel]]]]] = {
    "moved-city": [
        [
            ("Ann", "I live in Boston these days.", [rel("Ann", "lives_in", "Boston", "Ann lives in Boston", "new")]),
            ("Ben", "Nice, I work at Acme.", [rel("Ben", "works_at", "Acme", "Ben works at Acme", "new")]),
        ],
        [
            (
                "Ann",
                "Boston winters are rough, glad I live here though.",
                [rel("Ann", "lives_in", "Boston", "Ann lives in Boston", "duplicate")],
            )
        ],
        [
            (
                "Ann",
                "Big news: I moved to Denver last week!",
                [rel("Ann", "lives_in", "Denver", "Ann lives in Denver", "contradiction")],
            ),
            ("Ben", "Still at Acme here.", [rel("Ben", "works_at", "Acme", "Ben works at Acme", "duplicate")]),
        ],
        [("Ann", "Denver is home now.", [rel("Ann", "lives_in", "Denver", "Ann lives in Denver", "duplicate")])],
    ],
    "new-job": [
        [("Cara", "I'm an engineer at Initech.", [rel("Cara", "works_at", "Initech", "Cara works at Initech", "new")])],
        [
            (
                "Cara",
                "I quit Initech and joined Globex as a manager.",
                [rel("Cara", "works_at", "Globex", "Cara works at Globex", "contradiction")],
            )
        ],
        [
            ("Dev", "How is Globex, Cara?", []),
            (
                "Cara",
                "Globex is great, happy I work there.",
                [rel("Cara", "works_at", "Globex", "Cara works at Globex", "duplicate")],
            ),
        ],
    ],
    "meeting-moved": [
        [
            (
                "Eve",
                "Team sync is on Monday at 10.",
                [rel("Team sync", "scheduled_on", "Monday", "Team sync is on Monday at 10", "new")],
            )
        ],
        [
            (
                "Eve",
                "Reminder: team sync Monday 10am.",
                [rel("Team sync", "scheduled_on", "Monday", "Team sync is on Monday at 10", "duplicate")],
            )
        ],
        [
            (
                "Eve",
                "Correction: the team sync moves to Tuesday.",
                [rel("Team sync", "scheduled_on", "Tuesday", "Team sync is on Tuesday", "contradiction")],
            )
        ],
    ],
    "age-typo": [
        [
            (
                "Finn",
                "My daughter Mia is 7.",
                [
                    rel("Mia", "has_age", "7", "Mia is 7 years old", "new"),
                    rel("Finn", "parent_of", "Mia", "Finn is Mia's parent", "new"),
                ],
            )
        ],
        [("Finn", "Oops, typo: Mia is 8, not 7.", [rel("Mia", "has_age", "8", "Mia is 8 years old", "contradiction")])],
        [("Finn", "Mia loved her party.", [rel("Finn", "parent_of", "Mia", "Finn is Mia's parent", "duplicate")])],
    ],
    "favorite-food": [
        [("Gus", "My favorite food is sushi.", [rel("Gus", "favorite_food", "sushi", "Gus's favorite food is sushi", "new")])],
        [
            (
                "Gus",
                "Sushi again tonight, my favorite.",
                [rel("Gus", "favorite_food", "sushi", "Gus's favorite food is sushi", "duplicate")],
            )
        ],
        [
            (
                "Gus",
                "Honestly, ramen has become my favorite food.",
                [rel("Gus", "favorite_food", "ramen", "Gus's favorite food is ramen", "contradiction")],
            )
        ],
        [("Gus", "Ramen forever.", [rel("Gus", "favorite_food", "ramen", "Gus's favorite food is ramen", "duplicate")])],
    ],
    "car": [
        [("Hana", "I drive a Honda Civic.", [rel("Hana", "owns_car", "Honda Civic", "Hana drives a Honda Civic", "new")])],
        [
            (
                "Hana",
                "Sold the Civic, I drive a Tesla now.",
                [rel("Hana", "owns_car", "Tesla", "Hana drives a Tesla", "contradiction")],
            )
        ],
    ],
    "school": [
        [
            ("Ivo", "I study at MIT.", [rel("Ivo", "studies_at", "MIT", "Ivo studies at MIT", "new")]),
            ("Jo", "I study at Yale.", [rel("Jo", "studies_at", "Yale", "Jo studies at Yale", "new")]),
        ],
        [
            (
                "Ivo",
                "I transferred to Stanford this fall.",
                [rel("Ivo", "studies_at", "Stanford", "Ivo studies at Stanford", "contradiction")],
            )
        ],
        [("Jo", "Yale is still great for me.", [rel("Jo", "studies_at", "Yale", "Jo studies at Yale", "duplicate")])],
    ],
    "role": [
        [
            (
                "Kai",
                "I'm the project lead for Apollo.",
                [rel("Kai", "works_as", "project lead", "Kai is the project lead for Apollo", "new")],
            )
        ],
        [
            (
                "Kai",
                "As the project lead, I approve releases.",
                [rel("Kai", "works_as", "project lead", "Kai is the project lead for Apollo", "duplicate")],
            )
        ],
        [
            (
                "Kai",
                "I handed Apollo over; I'm a designer now.",
                [rel("Kai", "works_as", "designer", "Kai is a designer", "contradiction")],
            )
        ],
    ],
    "two-corrections": [
        [("Lea", "I live in Paris.", [rel("Lea", "lives_in", "Paris", "Lea lives in Paris", "new")])],
        [("Lea", "I moved to Lyon.", [rel("Lea", "lives_in", "Lyon", "Lea lives in Lyon", "contradiction")])],
        [("Lea", "And now I've moved to Nice.", [rel("Lea", "lives_in", "Nice", "Lea lives in Nice", "contradiction")])],
    ],
    "same-session-fix": [
        [
            ("Max", "The launch is on March 3.", [rel("Launch", "scheduled_on", "March 3", "The launch is on March 3", "new")]),
            (
                "Max",
                "Sorry, I meant March 5 for the launch.",
                [rel("Launch", "scheduled_on", "March 5", "The launch is on March 5", "contradiction")],
            ),
        ],
        [
            (
                "Nia",
                "Launch on March 5, noted.",
                [rel("Launch", "scheduled_on", "March 5", "The launch is on March 5", "duplicate")],
            )
        ],
    ],
}
