"""Where the searchable text lives on each database, and how a query reads it.

PostgreSQL: `file_records.search_vector`, a stored generated column (migration 0009) built with
the `file_search` text search configuration (`german` with `unaccent` in front where the
extension is available), under two GIN indexes: one over all records (the lists of signed-in
callers) and one over released records only (migration 0011; the public list, whose
`freigabe IS true` lets the planner pick it). PostgreSQL computes the column on every insert
and update, whoever writes the row.

SQLite: the FTS5 table `file_search`, one row per record, written by `sync_search_index` in the
same flush (and so the same transaction) as the record itself: every record the application
writes passes through the ORM session, so one session hook keeps the index in step.
`reindex` rebuilds it from the records (rows written by hand, a restored database).
"""

from __future__ import annotations

import sqlite3
from functools import lru_cache
from typing import Any

from sqlalchemy import (
    Engine,
    String,
    column,
    event,
    func,
    inspect,
    literal,
    literal_column,
    select,
    table,
    text,
)
from sqlalchemy.orm import Session

from app.models import FileRecord
from app.search.query import SearchQuery, analyze

#: The record columns that are searched; none of them is hidden from the public.
SEARCHED = (
    "titel",
    "beschreibung",
    "autoren",
    "sachschlagwoerter",
    "org_themen",
    "aktiv_id",
    "reprotyp",
    "original_name",
)
# FTS5 columns (and their weights in `search_rank`) with the record columns each one holds;
# PostgreSQL's weights A-D follow the same grouping (migration 0009).
FTS_COLUMNS = {
    "titel": (("titel",), 10.0),
    "people": (("autoren", "sachschlagwoerter", "org_themen"), 4.0),
    "codes": (("aktiv_id", "reprotyp", "original_name"), 2.0),
    "beschreibung": (("beschreibung",), 1.0),
}
FTS_TABLE = "file_search"
#: The GIN indexes over `search_vector` on PostgreSQL: all records, released ones (0009, 0011).
PG_INDEXES = ("ix_file_records_search", "ix_file_records_search_released")
#: Schema objects of the search that the ORM models do not describe, on purpose.
SCHEMA_NAMES = frozenset(
    {"search_vector", *PG_INDEXES, FTS_TABLE}
    | {f"{FTS_TABLE}_{suffix}" for suffix in ("data", "idx", "content", "docsize", "config")}
)

_fts = table(
    FTS_TABLE,
    column("record_id", String),
    column(FTS_TABLE),
    *(column(name, String) for name in FTS_COLUMNS),
)
_VECTOR = literal_column("file_records.search_vector")
_CONFIG = literal_column("'file_search'::regconfig")


def _is_postgres(bind: Any) -> bool:
    return bind.dialect.name == "postgresql"


def matching(query: Any, search: SearchQuery, bind: Any) -> Any:
    """`query` restricted to the records the search finds."""
    if _is_postgres(bind):
        return query.where(_VECTOR.op("@@")(_tsquery(search)))
    matches = _fts_matches(search)
    return query.join(matches, matches.c.record_id == FileRecord.id)


def best_first(search: SearchQuery, bind: Any) -> list[Any]:
    """Order terms for relevance, best first; only valid on a query built by `matching`."""
    score, higher_is_better = relevance(search, bind)
    return [score.desc() if higher_is_better else score.asc()]


def relevance(search: SearchQuery, bind: Any) -> tuple[Any, bool]:
    """The relevance of a match as a column expression, and whether a higher value is a
    better match; only valid on a query built by `matching`. `best_first` orders by it; a
    caller can also select it, e.g. to rank and count the matches in one pass."""
    if _is_postgres(bind):
        # ts_rank reads the record's own vector and the query, nothing of other rows.
        return func.ts_rank(_VECTOR, _tsquery(search)), True
    return literal_column("search_match.rank"), True


def _tsquery(search: SearchQuery) -> Any:
    return func.websearch_to_tsquery(_CONFIG, search.websearch())


def _fts_matches(search: SearchQuery) -> Any:
    return (
        select(
            _fts.c.record_id,
            func.search_rank(
                literal(rank_terms(search)), *(_fts.c[name] for name in FTS_COLUMNS)
            ).label("rank"),
        )
        .select_from(_fts)
        .where(_fts.c[FTS_TABLE].op("MATCH")(search.fts5()))
        .subquery("search_match")
    )


# --- relevance on SQLite ------------------------------------------------------------------

# FTS5's bm25() weighs a term by how many rows of the whole table hold it and a row's length
# by the table's average: hidden records move the order a caller sees, so a user could probe
# others' unreleased words by ranking two own records (issue 21). `search_rank` is the same
# BM25 saturation, per column and weighted, from the row alone: every term counts alike and
# lengths are measured against fixed typical lengths.

#: BM25's term-frequency saturation and length normalisation (FTS5's bm25 uses the same).
K1, B = 1.2, 0.75
#: Words a column typically holds, in place of the table's average.
TYPICAL_WORDS = {"titel": 8, "people": 6, "codes": 6, "beschreibung": 80}


def rank_terms(search: SearchQuery) -> str:
    """The terms that score, as `search_rank` reads them: stems space-separated, terms
    separated by `|` (stems are letters and digits only)."""
    return "|".join(" ".join(stems) for stems in search.scored_stems())


@lru_cache(maxsize=256)
def _patterns(terms: str) -> tuple[str, ...]:
    # `str.count` of " word " finds whole words; a word repeated right after itself counts
    # once, which only softens a score that saturates anyway.
    return tuple(f" {term} " for term in terms.split("|") if term)


_COLUMN_PARAMS = tuple(
    (weight, TYPICAL_WORDS[name]) for name, (_columns, weight) in FTS_COLUMNS.items()
)


def search_rank(terms: str, *columns: str | None) -> float:
    """How well one FTS5 row matches, higher is better, from that row alone (see above)."""
    score = 0.0
    patterns = _patterns(terms)
    for (weight, typical), words in zip(_COLUMN_PARAMS, columns, strict=True):
        if not words:
            continue
        spaced = f" {words} "
        norm = K1 * (1 - B + B * (words.count(" ") + 1) / typical)
        for pattern in patterns:
            found = spaced.count(pattern)
            if found:
                score += weight * found * (K1 + 1) / (found + norm)
    return score


def _register_search_rank(dbapi_connection: Any, _record: Any) -> None:
    if isinstance(dbapi_connection, sqlite3.Connection):
        dbapi_connection.create_function(
            "search_rank", 1 + len(FTS_COLUMNS), search_rank, deterministic=True
        )


# --- keeping the SQLite index in step ---------------------------------------------------

_DELETE = text(f"DELETE FROM {FTS_TABLE} WHERE record_id = :record_id")
_INSERT = text(
    f"INSERT INTO {FTS_TABLE} (record_id, {', '.join(FTS_COLUMNS)}) "
    f"VALUES (:record_id, {', '.join(':' + name for name in FTS_COLUMNS)})"
)


def index_values(record: Any) -> dict[str, Any]:
    """The FTS5 row of one record (an ORM object or a row with its columns)."""
    values: dict[str, Any] = {"record_id": record.id.hex}
    for name, (columns, _weight) in FTS_COLUMNS.items():
        values[name] = " ".join(analyze(getattr(record, c)) for c in columns).strip()
    return values


def _searched_text_changed(record: FileRecord) -> bool:
    state = inspect(record)
    return any(state.attrs[name].history.has_changes() for name in SEARCHED)


def sync_search_index(session: Session, _flush_context: Any) -> None:
    """After a flush that wrote records, write their FTS5 rows on the same connection."""
    changed = [
        obj for obj in session.new | session.dirty | session.deleted if isinstance(obj, FileRecord)
    ]
    if not changed:
        return
    connection = session.connection(bind_arguments={"mapper": inspect(FileRecord)})
    if _is_postgres(connection):
        return
    for record in changed:
        if record in session.dirty and not _searched_text_changed(record):
            continue
        connection.execute(_DELETE, {"record_id": record.id.hex})
        if record not in session.deleted:
            connection.execute(_INSERT, index_values(record))


def init_app() -> None:
    if not event.contains(Session, "after_flush", sync_search_index):
        event.listen(Session, "after_flush", sync_search_index)
    if not event.contains(Engine, "connect", _register_search_rank):
        event.listen(Engine, "connect", _register_search_rank)


def reindex(session: Session) -> int:
    """Rebuild the search index from the records; returns how many records it holds."""
    connection = session.connection()
    if _is_postgres(connection):
        for name in PG_INDEXES:
            connection.execute(text(f"REINDEX INDEX {name}"))
        count = session.scalar(select(func.count()).select_from(FileRecord)) or 0
    else:
        count = rebuild_fts(connection)
    session.commit()
    return count


def rebuild_fts(connection: Any, batch: int = 1000) -> int:
    """Fill the FTS5 table anew from the records, in batches in id order."""
    connection.execute(text(f"DELETE FROM {FTS_TABLE}"))
    columns = [FileRecord.id, *(getattr(FileRecord, name) for name in SEARCHED)]
    count, after = 0, None
    while True:
        query = select(*columns).order_by(FileRecord.id).limit(batch)
        if after is not None:
            query = query.where(FileRecord.id > after)
        rows = connection.execute(query).all()
        if not rows:
            return count
        connection.execute(_INSERT, [index_values(row) for row in rows])
        count += len(rows)
        after = rows[-1].id
