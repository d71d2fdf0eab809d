"""Search queries as people type them into a web search, parsed once and written out for each
database: words (all must match), "a phrase", OR between two terms, -word to exclude.

The parser refuses what it cannot read (an open quotation mark, a dangling OR, nothing but
exclusions) with a message for the `q` field, so that no query text ever reaches a database
function that could fail on it: the database only sees words made of letters and digits.
"""

from __future__ import annotations

import re
import unicodedata
from dataclasses import dataclass
from functools import lru_cache

import snowballstemmer

MAX_QUERY_LENGTH = 500
MAX_TERMS = 32

_TOKEN = re.compile(r'(?P<neg>-?)"(?P<phrase>[^"]*)(?P<close>"?)|(?P<bare>[^\s"]+)')
_WORD_SEPARATORS = re.compile(r"[\W_]+")
DANGLING_OR = "The q field has an OR that does not stand between two terms."


class QuerySyntaxError(ValueError):
    """The query cannot be read; the message is meant for the person who typed it."""


@dataclass(frozen=True)
class Term:
    """A word or a phrase: its words in order (a phrase matches them next to each other)."""

    words: tuple[str, ...]


@dataclass(frozen=True)
class SearchQuery:
    """Every group must match (a group matches if any of its terms does); no exclusion may."""

    groups: tuple[tuple[Term, ...], ...]
    excluded: tuple[Term, ...]

    def websearch(self) -> str:
        """PostgreSQL's `websearch_to_tsquery` syntax, every term quoted (so that a word such
        as "or" stays a word); the text search configuration stems and unaccents it."""
        parts = [" OR ".join(_quoted(term.words) for term in group) for group in self.groups]
        parts += ["-" + _quoted(term.words) for term in self.excluded]
        return " ".join(parts)

    def scored_stems(self) -> list[tuple[str, ...]]:
        """The stems of every term that can match (exclusions cannot), as SQLite indexes them."""
        return [_stems(term.words) for group in self.groups for term in group]

    def fts5(self) -> str:
        """An FTS5 MATCH expression over the stems that `analyze` writes into the index."""
        groups = [
            "(" + " OR ".join(_quoted(_stems(term.words)) for term in group) + ")"
            for group in self.groups
        ]
        expression = " AND ".join(groups)
        for term in self.excluded:
            expression = f"({expression}) NOT {_quoted(_stems(term.words))}"
        return expression


def _quoted(words: tuple[str, ...]) -> str:
    return '"' + " ".join(words) + '"'


def words_of(text: str) -> list[str]:
    return [word for word in _WORD_SEPARATORS.split(text) if word]


def parse_query(text: str) -> SearchQuery:
    if len(text) > MAX_QUERY_LENGTH:
        raise QuerySyntaxError(
            f"The q field must not be greater than {MAX_QUERY_LENGTH} characters."
        )
    groups: list[list[Term]] = []
    excluded: list[Term] = []
    pending_or = False
    last_was_excluded = False
    for match in _TOKEN.finditer(text):
        if match["bare"] == "OR":
            if not groups or pending_or or last_was_excluded:
                raise QuerySyntaxError(DANGLING_OR)
            pending_or = True
            continue
        if match["phrase"] is not None:
            if not match["close"]:
                raise QuerySyntaxError("The q field has a quotation mark that is never closed.")
            negated, words = bool(match["neg"]), words_of(match["phrase"])
        else:
            bare = match["bare"]
            negated = bare.startswith("-") and len(bare) > 1
            words = words_of(bare[1:] if negated else bare)
        if not words:
            continue  # punctuation only: nothing to look for
        term = Term(tuple(words))
        if negated:
            if pending_or:
                raise QuerySyntaxError("The q field cannot combine an excluded term with OR.")
            excluded.append(term)
        elif pending_or:
            groups[-1].append(term)
        else:
            groups.append([term])
        pending_or = False
        last_was_excluded = negated
    if pending_or:
        raise QuerySyntaxError(DANGLING_OR)
    if not groups:
        raise QuerySyntaxError(
            "The q field must contain at least one word to search for (not only excluded ones)."
        )
    if sum(map(len, groups)) + len(excluded) > MAX_TERMS:
        raise QuerySyntaxError(f"The q field may have at most {MAX_TERMS} terms.")
    return SearchQuery(tuple(map(tuple, groups)), tuple(excluded))


# --- word forms on SQLite ---------------------------------------------------------------

# PostgreSQL reduces words with its `german` configuration (snowball stemmer, after
# `unaccent`); SQLite's FTS5 has no German stemmer, so the same snowball algorithm runs here,
# on the text written into the index and on the words of a query alike.


@lru_cache(maxsize=1)
def _stemmer() -> snowballstemmer.stemmer:
    return snowballstemmer.stemmer("german")


def _fold(word: str) -> str:
    decomposed = unicodedata.normalize("NFKD", word.casefold())
    return "".join(c for c in decomposed if not unicodedata.combining(c))


def _stems(words: tuple[str, ...] | list[str]) -> tuple[str, ...]:
    stemmer = _stemmer()
    return tuple(stemmer.stemWord(_fold(word)) for word in words)


def analyze(text: str | None) -> str:
    """Text as the SQLite index keeps it: the stem of every word, in order."""
    return " ".join(_stems(words_of(text or "")))
