"""Full-text search with `q` on both lists: what is found, in which order, by whom."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest
from hypothesis import given
from hypothesis import strategies as st
from sqlalchemy import event as sa_event

from app.extensions import db
from app.search.index import PG_INDEXES, reindex
from tests.conftest import STACKS
from tests.files.test_list import insert_rows
from tests.support.api import Account, Api
from tests.test_no_500 import FUZZ

T0 = datetime(2025, 3, 1, 12, 0, tzinfo=UTC)


def at(minutes: int) -> datetime:
    return T0 + timedelta(minutes=minutes)


@pytest.fixture
def library(api: Api, alice: Account, bob: Account) -> dict[str, str]:
    names = [
        "arbeitsmarkt",
        "berichte",
        "strasse",
        "phrase",
        "reversed",
        "unreleased",
        "internal",
        "bobs",
        "codes",
    ]
    ids = insert_rows(
        api,
        alice,
        [
            {
                "created_at": at(1),
                "titel": "Der Arbeitsmarkt 2025",
                "beschreibung": "Zahlen zur Beschäftigung",
                "path": "reports/2025",
            },
            {
                "created_at": at(2),
                "titel": "Berichte aus den Arbeitsmärkten",
                "autoren": "Jörg Müller",
                "path": "reports/2024",
            },
            {"created_at": at(3), "titel": "Straße und Verkehr", "sachschlagwoerter": "Lärm"},
            {"created_at": at(4), "titel": "Klima Daten Berlin", "org_themen": "Umwelt"},
            {"created_at": at(5), "titel": "Berlin Daten zum Klima", "reprotyp": "Datensatz"},
            {"created_at": at(6), "titel": "Geheimer Arbeitsmarkt", "freigabe": False},
            {
                "created_at": at(7),
                "titel": "Intern",
                "erstellt_von": "Zebrafisch",
                "freigegeben_von": "Okapi",
            },
        ],
    )
    ids += insert_rows(api, bob, [{"created_at": at(8), "titel": "Bobs Arbeitsmarkt"}])
    ids += insert_rows(
        api,
        alice,
        [
            {
                "created_at": at(9),
                "titel": "Nichts",
                "aktiv_id": "AKT-2021-0042",
                "original_name": "quartal_bericht-q3.pdf",
            }
        ],
    )
    return dict(zip(names, ids, strict=True))


def search(api: Api, url: str, account: Account | None = None, **params) -> list[str]:
    response = api.get(url, account, query_string=params)
    assert response.status_code == 200, response.get_json()
    return [record["id"] for record in response.get_json()["data"]]


def public(api: Api, q: str, **params) -> list[str]:
    return search(api, "/api/public/files", q=q, **params)


def test_words_are_case_accent_and_word_form_insensitive(api: Api, library):
    assert set(public(api, "arbeitsmarkt")) == {
        library["arbeitsmarkt"],
        library["berichte"],
        library["bobs"],
    }
    assert set(public(api, "Bericht")) == {library["berichte"], library["codes"]}
    assert public(api, "ARBEITSMÄRKTE berichte") == [library["berichte"]]
    assert public(api, "strasse") == [library["strasse"]]
    assert public(api, "larm") == [library["strasse"]]
    assert public(api, "jorg") == [library["berichte"]]
    assert public(api, "BESCHAFTIGUNG") == [library["arbeitsmarkt"]]


def test_every_searched_field_is_found(api: Api, library):
    assert public(api, "Müller") == [library["berichte"]]
    assert public(api, "umwelt") == [library["phrase"]]
    assert public(api, "datensatz") == [library["reversed"]]
    assert public(api, "AKT-2021-0042") == [library["codes"]]
    assert public(api, "quartal") == [library["codes"]]
    assert public(api, '"bericht q3"') == [library["codes"]]


def test_phrase_or_and_exclusion(api: Api, library):
    both = {library["phrase"], library["reversed"]}
    assert set(public(api, "klima daten")) == both
    assert public(api, '"klima daten"') == [library["phrase"]]
    assert set(public(api, "strasse OR umwelt")) == {library["strasse"], library["phrase"]}
    assert set(public(api, "arbeitsmarkt -bobs")) == {library["arbeitsmarkt"], library["berichte"]}
    assert public(api, 'klima -"klima daten"') == [library["reversed"]]
    assert public(api, "strasse or umwelt") == []  # lowercase "or" is a word like any other


def test_relevance_order_by_default_and_newest_first_on_request(api: Api, library):
    # "Arbeitsmarkt" in the title of three records; the description adds weight to none, so
    # a title that is mostly that word ranks first, and ties fall back to newest first.
    found = public(api, "arbeitsmarkt beschaftigung")
    assert found == [library["arbeitsmarkt"]]
    ranked = public(api, "klima OR umwelt")
    assert ranked[0] == library["phrase"]  # matches both terms
    newest = public(api, "klima OR umwelt", sort="-created_at")
    assert newest == [library["reversed"], library["phrase"]]


def test_public_search_never_finds_unreleased_records_or_internal_fields(api: Api, library):
    assert library["unreleased"] not in public(api, "geheimer arbeitsmarkt OR geheimer")
    assert public(api, "Zebrafisch") == [] and public(api, "Okapi") == []


def test_private_search_follows_the_caller_scope(api: Api, library, alice, bob, admin):
    own = search(api, "/api/files", alice, q="arbeitsmarkt")
    assert set(own) == {library["arbeitsmarkt"], library["berichte"], library["unreleased"]}
    assert search(api, "/api/files", bob, q="arbeitsmarkt") == [library["bobs"]]
    assert len(search(api, "/api/files", admin, q="arbeitsmarkt")) == 4
    assert search(api, "/api/files", alice, q="geheimer", freigabe="1") == []
    assert search(api, "/api/files", alice, q="Zebrafisch") == []


def test_search_combines_with_filters_and_the_page_envelope(api: Api, library):
    body = api.get(
        "/api/public/files", query_string={"q": "arbeitsmarkt", "path": "reports/2024"}
    ).get_json()
    assert [r["id"] for r in body["data"]] == [library["berichte"]]
    assert body["total"] == 1 and body["current_page"] == 1 and body["next_cursor"] is None
    assert "q=arbeitsmarkt" in body["first_page_url"]


def test_search_pages_and_cursors(api: Api, alice: Account):
    insert_rows(
        api,
        alice,
        [{"created_at": at(i), "titel": f"Messreihe {i}"} for i in range(150)]
        + [{"created_at": at(200), "titel": "Anderes"}],
    )
    first = api.get("/api/public/files", query_string={"q": "messreihe"}).get_json()
    second = api.get("/api/public/files", query_string={"q": "messreihe", "page": 2}).get_json()
    assert first["total"] == 150 and len(first["data"]) == 100 and len(second["data"]) == 50
    assert first["next_cursor"] is None  # relevance order: no keyset continuation
    paged = {r["id"] for r in first["data"]} | {r["id"] for r in second["data"]}
    assert len(paged) == 150

    walked, cursor = [], ""
    while cursor is not None:
        body = api.get(
            "/api/public/files", query_string={"q": "messreihe", "cursor": cursor}
        ).get_json()
        walked += [r["titel"] for r in body["data"]]
        cursor = body["next_cursor"]
    assert walked == [f"Messreihe {i}" for i in reversed(range(150))]


@pytest.mark.parametrize(
    ("q", "message"),
    [
        ('"open phrase', "quotation mark"),
        ("OR word", "OR"),
        ("word OR", "OR"),
        ("a OR OR b", "OR"),
        ("-alone", "at least one word"),
        ("!!! ???", "at least one word"),
        ("a OR -b", "excluded"),
        ("x" * 501, "greater than"),
        (" ".join(f"w{i}" for i in range(40)), "at most"),
    ],
)
def test_malformed_queries_are_422_on_q(api: Api, alice: Account, q: str, message: str):
    for url, account in (("/api/public/files", None), ("/api/files", alice)):
        response = api.get(url, account, query_string={"q": q})
        assert response.status_code == 422
        body = response.get_json()
        assert list(body["errors"]) == ["q"] and message in body["errors"]["q"][0]


def test_sort_values(api: Api, alice: Account):
    bad = api.get("/api/public/files", query_string={"q": "x", "sort": "titel"})
    assert bad.status_code == 422 and list(bad.get_json()["errors"]) == ["sort"]
    mixed = api.get("/api/public/files", query_string={"q": "x", "sort": "relevance", "cursor": ""})
    assert mixed.status_code == 422 and list(mixed.get_json()["errors"]) == ["sort"]
    assert api.get("/api/public/files", query_string={"sort": "relevance"}).status_code == 200


def test_changes_are_searchable_at_once(api: Api, alice: Account):
    record = api.create(alice, "a.pdf", titel="Vorläufiger Titel")
    assert public(api, "vorlaufig") == [record["id"]]
    api.patch(record["id"], alice, {"titel": "Endgültige Fassung"})
    assert public(api, "vorlaufig") == [] and public(api, "endgultig") == [record["id"]]
    api.patch(record["id"], alice, {"freigabe": False})
    assert public(api, "endgultig") == []
    assert search(api, "/api/files", alice, q="endgultig") == [record["id"]]
    assert api.delete(record["id"], alice).status_code == 204
    assert search(api, "/api/files", alice, q="endgultig") == []


def test_reindex_rebuilds_the_index(api: Api, alice: Account, library, runner):
    result = runner.invoke(args=["search", "reindex"])
    assert result.exit_code == 0, result.output
    assert "9 records" in result.output
    assert set(public(api, "arbeitsmarkt")) == {
        library["arbeitsmarkt"],
        library["berichte"],
        library["bobs"],
    }
    with api.app.app_context():
        assert reindex(db.session) == 9


@pytest.mark.parametrize("stack_config", [STACKS[1]], indirect=True)  # PostgreSQL's index
def test_public_search_reads_the_index_of_released_records(api: Api, library):
    """On PostgreSQL the public search (total and page) can use the partial GIN index of
    migration 0011: its condition is implied by how the list asks for released records."""
    with api.app.app_context():
        assert db.engine.dialect.name == "postgresql"
        statements: list[tuple[str, object]] = []

        def capture(_conn, _cursor, statement, parameters, _context, _executemany):
            if "search_vector @@" in statement:
                statements.append((statement, parameters))

        sa_event.listen(db.engine, "before_cursor_execute", capture)
        try:
            assert len(public(api, "arbeitsmarkt")) == 3
        finally:
            sa_event.remove(db.engine, "before_cursor_execute", capture)
        assert statements
        with db.engine.connect() as conn, conn.begin() as transaction:
            # Nine rows: left a choice, the planner reads the table or another index. Leave
            # it the two search indexes (dropped in a transaction that is rolled back).
            others = conn.exec_driver_sql(
                "SELECT indexname FROM pg_indexes WHERE tablename = 'file_records' "
                "AND NOT indexname = ANY(%(kept)s)",
                {"kept": ["file_records_pkey", *PG_INDEXES]},
            ).scalars()
            for name in list(others):
                conn.exec_driver_sql(f'DROP INDEX "{name}"')
            conn.exec_driver_sql("SET LOCAL enable_seqscan = off")
            for statement, parameters in statements:
                plan = "\n".join(
                    row[0] for row in conn.exec_driver_sql("EXPLAIN " + statement, parameters)
                )
                assert "ix_file_records_search_released" in plan, plan
            transaction.rollback()


def test_ranking_cannot_see_records_the_caller_cannot_see(api: Api, alice, bob):
    """The probe of issue 21 (item 5): a user ranks two own records, one with the word asked
    about and one with a word nobody else has; hidden records that contain the word must not
    change their order (on SQLite, bm25's statistics over the whole table did)."""
    insert_rows(api, alice, [{"created_at": at(n), "titel": f"Neutral {n}"} for n in range(20)])
    planted, probed = insert_rows(
        api,
        alice,
        [
            {"created_at": at(30), "titel": "Xqzvw"},
            {"created_at": at(31), "titel": "Kranich"},
        ],
    )
    probe = {"q": "kranich OR xqzvw", "sort": "relevance"}
    own_before = search(api, "/api/files", alice, **probe)
    public_before = public(api, **probe)
    assert own_before == public_before == [probed, planted]  # a tie: newest first
    hidden = [{"created_at": at(40 + n), "titel": "Kranich", "freigabe": False} for n in range(10)]
    insert_rows(api, bob, hidden)
    assert search(api, "/api/files", alice, **probe) == own_before
    assert public(api, **probe) == public_before


# Query text weighted towards what the parser and the databases' query languages treat
# specially (quotes, OR, minus, FTS5 and tsquery operators), plus any other character.
QUERY_TEXT = st.lists(
    st.one_of(
        st.sampled_from(
            ['"', "-", " ", " OR ", "AND", "NOT", "*", ":", "^", "(", ")", "&", "|", "!", "<->"]
            + ["NEAR", "'", "\\", "%", "_", "ä", "ß", "²", "\x00", "klima", "daten"]
        ),
        st.text(max_size=6),
    ),
    max_size=12,
).map("".join)


@given(q=QUERY_TEXT, sort=st.sampled_from(["relevance", "-created_at", "", "x"]))
@FUZZ
def test_any_query_is_answered_without_500(api: Api, alice: Account, q: str, sort: str):
    """Both lists: 200 with a page, or a JSON 422 on `q` or `sort` (issue 21, item 6)."""
    if not api.rows():
        insert_rows(api, alice, [{"created_at": at(1), "titel": "Klima Daten", "freigabe": True}])
    for url, account in (("/api/public/files", None), ("/api/files", alice)):
        response = api.get(url, account, query_string={"q": q, "sort": sort})
        assert response.status_code in (200, 422), (q, response.status_code)
        body = response.get_json()
        if response.status_code == 422:
            assert set(body["errors"]) <= {"q", "sort"} and body["message"]
        else:
            assert isinstance(body["data"], list)
