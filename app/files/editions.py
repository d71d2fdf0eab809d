"""New editions (issue 49): a new record with its own id, DOI and citation, linked to the
released record it succeeds by `IsNewVersionOf` (the older one shows `IsPreviousVersionOf`
by itself, app/files/relations.py, without being written). A replacement stays what it is, a
new version under the same id and DOI (app/files/versions.py); docs/links-and-series.md says
when to use which.

What the new edition is not sent it takes from the older record: its public fields and
`erstellt_von`, its series and number, its links (but those to editions: the new one is
the newest of its line), never its embargo, its release or who released it.
"""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

from app.exceptions import DomainError
from app.files.access import RecordLike
from app.files.versions import METADATA
from app.schemas.attribution import canonical, in_step, parsed
from app.schemas.records import INPUT_ALIASES

#: What a new edition takes from the older record unless the form sends it: the public
#: fields but the embargo, and who made the record.
INHERITED = (*(name for name in METADATA if name != "sperrfrist"), "erstellt_von")
#: The form's names of the fields of `INHERITED` (the record's columns where they differ).
SENT_AS = {"series": ("series_slug", "series_number"), "creators": ("creators", "autoren")}
EDITION_LINKS = ("IsNewVersionOf", "IsPreviousVersionOf")


class NotReleased(DomainError):
    """Only a released record gets new editions (409)."""

    status = 409


def snapshot(older: RecordLike) -> dict[str, Any]:
    """What a new edition needs of the older record, read before the body streams."""
    if not older.freigabe:
        raise NotReleased(
            "Only a released record gets new editions; replace the content of an unreleased "
            f"one instead (POST /api/files/{older.id}/content)."
        )
    return {"id": older.id, "user_id": older.user_id, **{n: getattr(older, n) for n in INHERITED}}


def sent_columns(fields: list[str]) -> set[str]:
    """The record's columns a form's field names set."""
    found: set[str] = set()
    for name in fields:
        name = INPUT_ALIASES.get(name, name)
        found.update(SENT_AS.get(name, (name,)))
    return found


def metadata(older: dict[str, Any], loaded: dict[str, Any], fields: list[str]) -> dict[str, Any]:
    """A new edition's metadata: what the form sent (`loaded`, of the fields `fields`), the
    rest of `INHERITED` from `older` (its `snapshot`), `autoren` and `creators` kept in step
    (an `autoren` sent alone renames the older record's creators), and the link
    `IsNewVersionOf` the older record."""
    sent = sent_columns(fields)
    values = {**loaded, **{name: older[name] for name in INHERITED if name not in sent}}
    if "autoren" in sent and "creators" not in sent:
        renamed = in_step({"autoren": loaded.get("autoren")}, SimpleNamespace(**older))
        values["creators"] = renamed.get("creators", older["creators"])
    links = [
        link
        for link in parsed(values.get("related_identifiers")) or []
        if link["relation_type"] not in EDITION_LINKS
    ]
    links.append(
        {
            "relation_type": "IsNewVersionOf",
            "identifier": str(older["id"]),
            "identifier_type": "record",
        }
    )
    values["related_identifiers"] = canonical(list({canonical(x): x for x in links}.values()))
    return values
