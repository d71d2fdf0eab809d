"""The Cite box is rendered when a record is written and stored in `record_citations`; a page
uses it while it fits the record and otherwise renders the citation itself. Either way the
page shows the same citation. `flask pages refresh-citations` renders the missing and stale
ones, and only those."""

from __future__ import annotations

import uuid
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st
from lxml import html
from sqlalchemy import select, update

from app.extensions import db
from app.models import RecordCitation
from app.pages import citation
from tests.support.api import Account, Api


def cite_box(api: Api, record_id: str, **headers: str) -> str:
    response = api.client.get(f"/records/{record_id}", headers=headers)
    assert response.status_code == 200
    (element,) = html.fromstring(response.get_data()).xpath("//p[@class='citation']")
    return html.tostring(element, encoding="unicode")


def stored(api: Api, record_id: str) -> list[RecordCitation]:
    with api.app.app_context():
        rows = db.session.scalars(
            select(RecordCitation).where(RecordCitation.record_id == uuid.UUID(record_id))
        ).all()
        db.session.expunge_all()
        return list(rows)


def forge(api: Api, record_id: str, **values: Any) -> None:
    """Change the stored row by hand (as SQL would)."""
    with api.app.app_context():
        db.session.execute(
            update(RecordCitation)
            .where(RecordCitation.record_id == uuid.UUID(record_id))
            .values(**values)
        )
        db.session.commit()


def test_a_written_record_keeps_its_citation_and_the_page_shows_it(api: Api, alice: Account):
    record = api.create(alice, "bericht.pdf", titel="Löhne & <Preise>", autoren="Muster, Erika")
    (row,) = stored(api, record["id"])
    assert citation.ADDRESS in row.de and citation.ADDRESS in row.en
    german = cite_box(api, record["id"])
    english = cite_box(api, record["id"], **{"Accept-Language": "en"})
    assert "Muster, E. (" in german and "<i>Löhne &amp; &lt;Preise&gt;</i>" in german
    assert f"Verfügbar unter: http://localhost/records/{record['id']}." in german
    assert f"Available at: http://localhost/records/{record['id']}." in english
    # The page reads the stored row: a forged text with the right key shows ...
    forge(api, record["id"], de=row.de.replace("Muster", "Gefälscht"))
    assert cite_box(api, record["id"]) == german.replace("Muster", "Gefälscht")
    # ... and without the row it renders the same citation itself.
    forge(api, record["id"], de=row.de)
    with api.app.app_context():
        db.session.query(RecordCitation).delete()
        db.session.commit()
    assert cite_box(api, record["id"]) == german
    assert cite_box(api, record["id"], **{"Accept-Language": "en"}) == english


def test_a_citation_that_no_longer_fits_is_rendered_anew(api: Api, alice: Account):
    record = api.create(alice, "bericht.pdf", titel="Erster Titel", autoren="Muster, Erika")
    (row,) = stored(api, record["id"])
    forge(api, record["id"], de=row.de.replace("Erster", "Unverändert"))
    api.set_columns(record["id"], reihenfolge=3)  # nothing the citation prints: not rendered
    assert stored(api, record["id"])[0].de == row.de.replace("Erster", "Unverändert")
    # A row that does not fit (another style, another release, a record changed by hand).
    forge(api, record["id"], key="0" * 32, de="veraltet", en="stale")
    assert "<i>Erster Titel</i>" in cite_box(api, record["id"])
    assert "<i>Erster Titel</i>" in cite_box(api, record["id"], **{"Accept-Language": "en"})


def test_changes_through_the_api_render_the_citation_again(api: Api, alice: Account):
    record = api.create(alice, "bericht.pdf", titel="Alt", autoren="Muster, Erika")
    key = stored(api, record["id"])[0].key
    answer = api.patch(record["id"], alice, {"titel": "Neu", "autoren": "Beispiel, Max"})
    assert answer.status_code == 200
    (row,) = stored(api, record["id"])
    assert row.key != key
    box = cite_box(api, record["id"])
    assert box.startswith('<p class="citation">Beispiel, M. (') and "<i>Neu</i>" in box
    # The row is what the page showed: removing it changes nothing a reader sees.
    forge(api, record["id"], de=row.de.replace("Neu", "Anders"))
    assert "<i>Anders</i>" in cite_box(api, record["id"])


def test_a_deleted_record_leaves_no_citation_behind(api: Api, alice: Account):
    record = api.create(alice, "bericht.pdf", titel="Weg")
    assert len(stored(api, record["id"])) == 1
    assert api.delete(record["id"], alice).status_code == 204
    with api.app.app_context():
        assert db.session.scalars(select(RecordCitation)).all() == []


NAMES = st.text(st.characters(codec="utf-8", exclude_categories=("Cs",)), max_size=30)
AUTHOR = st.one_of(
    st.builds(lambda f, g: {"family": f, "given": g}, NAMES, NAMES),
    st.builds(lambda name: {"literal": name}, NAMES),
)
HOSTS = st.sampled_from(
    ["localhost", "repo.example", "[::1]:8080", "xn--bcher-kva.example", "a.example:5000/sub"]
)


@settings(max_examples=150, deadline=None)
@given(
    title=NAMES,
    authors=st.lists(AUTHOR, max_size=5),
    kind=st.sampled_from(["report", "dataset", "song", "motion_picture", "graphic"]),
    year=st.integers(1900, 2100),
    publisher=NAMES,
    scheme=st.sampled_from(["http", "https"]),
    host=HOSTS,
    language=st.sampled_from(["de", "en"]),
    doi=st.one_of(st.none(), st.builds("10.5072/{}".format, NAMES.filter(str.strip))),
)
def test_a_stored_citation_is_the_citation_rendered_on_the_page(
    title, authors, kind, year, publisher, scheme, host, language, doi
):
    record_id = str(uuid.uuid4())
    item: dict[str, Any] = {
        "id": record_id,
        "type": kind,
        "title": title,
        "issued": {"date-parts": [[year, 1, 1]]},
        "publisher": publisher,
        "URL": f"{scheme}://{host}/records/{record_id}",
    }
    if authors:
        item["author"] = authors
    if doi is not None:  # a DOI reserved after the citation was stored changes no key
        item["DOI"] = doi
    kept = citation.stored_citations({**item, "URL": "ignored", "DOI": None})
    assert kept["key"] == citation.citation_key(item)  # the page uses it, renders nothing
    shown = citation.page_citation(item, kept, language)
    assert shown == citation.formatted_citation(item, language)


def test_only_the_statements_that_ask_are_prepared_on_postgresql(postgres_url, tmp_path):
    # The page's read is prepared (planned once per connection); a path filter never is,
    # however often it runs: its generic plan could not use the path index.
    from sqlalchemy import text

    from app import create_app
    from app.models import FileRecord
    from app.pages import routes
    from tests.conftest import base_config

    app = create_app(
        base_config(
            SQLALCHEMY_DATABASE_URI=postgres_url,
            STORAGE_BACKEND="local",
            STORAGE_LOCAL_ROOT=str(tmp_path),
        )
    )
    with app.app_context():
        connection = db.session.connection()
        by_path = select(FileRecord.id).where(FileRecord.path.like("a%"))
        for _ in range(20):
            connection.execute(by_path).all()
        connection.execute(routes._READ_PAGE, {"record_id": uuid.uuid4()}).all()
        prepared = connection.execute(text("SELECT statement FROM pg_prepared_statements"))
        (statement,) = prepared.scalars().all()
        assert "record_citations" in statement and "LIKE" not in statement
        db.session.rollback()
    with app.app_context():
        db.engine.dispose()


def test_the_operator_renders_the_missing_and_stale_citations_and_only_those(
    api: Api, runner, alice, monkeypatch
):
    # As after the upgrade to migration 0018, or records written by SQL: no stored citation.
    from app.pages import stored as stored_module

    first = api.create(alice, "eins.pdf", titel="Eins", autoren="Muster, Erika")
    second = api.create(alice, "zwei.pdf", titel="Zwei")
    third = api.create(alice, "drei.pdf", titel="Drei")
    german = cite_box(api, first["id"])
    rendered: list[str] = []
    real = stored_module.stored_citations

    def counted(item: dict[str, Any]) -> dict[str, str]:
        rendered.append(item["id"])
        return real(item)

    monkeypatch.setattr(stored_module, "stored_citations", counted)
    with api.app.app_context():
        db.session.query(RecordCitation).where(
            RecordCitation.record_id != uuid.UUID(third["id"])
        ).delete()
        db.session.commit()
    result = runner.invoke(args=["pages", "refresh-citations"])
    assert result.exit_code == 0, result.output
    assert result.output == "citations: 3 records checked, 2 rendered and stored\n"
    assert sorted(rendered) == sorted([first["id"], second["id"]])  # not the fitting third
    assert len(stored(api, first["id"])) == len(stored(api, second["id"])) == 1
    forge(api, first["id"], de=stored(api, first["id"])[0].de.replace("Eins", "Gefälscht"))
    assert "<i>Gefälscht</i>" in cite_box(api, first["id"])  # the page shows what was stored
    # A row that no longer fits (another style or release, a record changed by SQL) is
    # rendered anew; the others are only checked, by their key, without rendering.
    forge(api, first["id"], key="0" * 32)
    rendered.clear()
    result = runner.invoke(args=["pages", "refresh-citations"])
    assert result.output == "citations: 3 records checked, 1 rendered and stored\n"
    assert rendered == [first["id"]]
    assert cite_box(api, first["id"]) == german
    rendered.clear()
    result = runner.invoke(args=["pages", "refresh-citations"])
    assert result.output.endswith(", 0 rendered and stored\n") and rendered == []


def test_the_citation_is_stored_by_a_listener_the_app_wires(app):
    # Wired by `init_app` (app/__init__.py), once however many apps are made, not on import.
    from sqlalchemy import event

    from app.models import FileRecord
    from app.pages import init_app, stored

    init_app()
    assert event.contains(FileRecord, "after_insert", stored._inserted)
    assert event.contains(FileRecord, "after_update", stored._updated)


def test_a_citation_that_cannot_be_rendered_does_not_stop_the_write(api, alice, monkeypatch):
    from app.pages import stored as kept

    def broken(item):  # type: ignore[no-untyped-def]
        raise ValueError("citeproc-py could not render this")

    monkeypatch.setattr(kept, "stored_citations", broken)
    record = api.create(alice, "bericht.pdf", titel="Trotzdem")
    assert stored(api, record["id"]) == []
    monkeypatch.undo()
    assert "<i>Trotzdem</i>" in cite_box(api, record["id"])  # rendered by the page itself


def test_a_change_and_the_operator_keeping_the_same_citation_do_not_collide(api, alice):
    # Both write the row of a record that has none (as after the upgrade): the second
    # replaces the first instead of failing on the primary key.
    from app.pages.stored import citation_row, keep

    record = api.create(alice, "bericht.pdf", titel="Beide")
    with api.app.app_context():
        db.session.query(RecordCitation).delete()
        db.session.commit()
        row = api.row(record["id"])
        first = citation_row(row, "Erstes Repositorium")
        second = citation_row(row, api.app.config["REPOSITORY_NAME"])
        connection = db.session.connection()
        keep(connection, [first])
        keep(connection, [second])
        db.session.commit()
    (kept,) = stored(api, record["id"])
    assert (kept.key, kept.de) == (second["key"], second["de"])
