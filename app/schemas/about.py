"""What each field means, for the OpenAPI document (`metadata` never affects validation)."""

from __future__ import annotations

ABOUT = {
    "id": "Record identifier: a random UUID (version 4), canonical lowercase form.",
    "aktiv_id": "External activity or case number.",
    "original_name": "The client's file name at upload, without folders; the download name.",
    "path": (
        "Virtual target path, a label only: segments of letters, digits, '.', '_' and '-' "
        "separated by single slashes; no leading or trailing slash, no '..' segment."
    ),
    "mime_type": "Type detected from the content, never the client's claim; the download type.",
    "size": "Size of the content in bytes.",
    "reprotyp": "Representation type (free text).",
    "titel": "Title.",
    "beschreibung": "Short description, at most 5000 characters.",
    "autoren": (
        "Author statement: names separated by ';', a person as 'Family, Given'. Kept in step "
        "with creators (docs/contract.md): sent alone it renames them, keeping the identifiers "
        "of every name it still has."
    ),
    "creators": (
        "The creators, structured (null: none beyond the text of autoren). Sending them sets "
        "autoren to their names joined by '; '; [] removes every author. Forms send JSON text."
    ),
    "related_identifiers": (
        "Links to other resources with DataCite's relation types: another record of this "
        "service by id (its page shows the inverse), a DOI or a URL. Forms send JSON text."
    ),
    "series": (
        "The series the record is part of and its number there, or null. Forms send JSON text."
    ),
    "sachschlagwoerter": "Subject keywords.",
    "org_themen": "Subject area of the organisation.",
    "sperrfrist": (
        "Embargo date (YYYY-MM-DD): downloads are blocked for everyone but administrators "
        "until that day in the service's time zone; on the day itself they are allowed."
    ),
    "reihenfolge": "Sort order, a whole number in the signed 32-bit range; default 0.",
    "freigabe": (
        "Release flag; default true. false hides the record from the public and blocks "
        "downloads for everyone but administrators."
    ),
    "erstellt_von": "Free statement of the creating person or body.",
    "freigegeben_von": "Free statement of the releasing person or body.",
    "created_at": "Creation time (UTC, six fractional digits); a content replacement keeps it.",
    "updated_at": "Time of the last metadata update or content replacement, same format.",
    "version": (
        "Content version: 1 at creation, +1 for each replacement that changes the bytes "
        "(identical bytes change nothing)."
    ),
    "email": "The account's email address (compared case-insensitively).",
    "password": "The account's password.",
    "token_name": "A name for the new token, at most 255 characters.",
}
QUERY_ABOUT = {
    "page": "Page number, a whole number of at least 1; each page holds up to 100 records.",
    "path": "Path prefix: a plain string prefix of the record's path (% and _ match literally).",
    "aktiv_id": "Exact external activity or case number.",
    "since": (
        "Only records created at or after this instant: YYYY-MM-DD or "
        "YYYY-MM-DDTHH:MM[:SS[.ffffff]] with an optional Z, +HH:MM or +HHMM (URL-encode the "
        "plus sign); without an offset the value is UTC."
    ),
    "freigabe": "Release status: 1 lists released records, 0 unreleased ones.",
    "reprotyp": "Exact representation type.",
    "cursor": (
        "Keyset pagination for deep paging and sync clients: send it empty for the first page, "
        "then the next_cursor of each answer. Same order and filters as page; the answer has "
        "no total. Takes precedence over page."
    ),
}


def about(name: str) -> dict[str, str]:
    return {"description": ABOUT[name]}


def query_about(name: str) -> dict[str, str]:
    return {"description": QUERY_ABOUT[name]}
