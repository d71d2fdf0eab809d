"""Finding things: the folder pages (`/browse/`), the search page (`/search`) and what they show.

Folders come from the same source as OAI-PMH's ListSets, the `file_path_counts` rows of
released records; each sub-folder of a page is found by one or two index lookups, plus one
for each `-` or `.` in its name (names that sort between `a` and `a/`), however many folders
there are. Records come from app/files/access.py and app/files/listing.py, as in the public API.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass, field
from typing import Any

from flask import Response, request
from flask_babel import gettext as _
from sqlalchemy import Select, String, bindparam, or_, select, text

from app.covers import services as covers
from app.covers.services import Shown
from app.exceptions import RecordNotFound, ValidationFailed
from app.extensions import db
from app.files import access, answers
from app.files.listing import NEWEST_FIRST, Listing, Position, before, paginate, position_of
from app.http import external_url, load
from app.models import FilePathCount, FileRecord
from app.pages import i18n
from app.pages.blueprint import bp
from app.pages.i18n import render_page
from app.pages.paging import BadPageRequest, cursor_arg, page_url
from app.pages.records import clean_text, size_text, title_of
from app.schemas.cursor import encode_cursor
from app.schemas.field_types import PATH_SEGMENT
from app.search.schemas import public_list_query_schema

#: Records and sub-folders a folder page shows at a time; search results per page.
PAGE_SIZE = 50
#: The deepest numbered search page: past it the reader narrows the query instead.
MAX_SEARCH_PAGE = 200


@dataclass(slots=True)
class RecordItem:
    """One record in a list of a page."""

    url: str
    title: str
    file_name: str
    mime_type: str
    size_text: str
    published: Any
    embargo_until: Any
    folder: str
    #: Its cover, while the public may download its content (app/covers).
    cover: Shown | None = None


@dataclass(slots=True)
class FolderPage:
    folder: str
    crumbs: list[tuple[str, str]]
    children: list[tuple[str, str]]
    more_folders: str | None
    records: list[RecordItem]
    older: str | None
    feeds: list[tuple[str, str, str]] = field(default_factory=list)


def valid_folder(folder: str) -> bool:
    return all(PATH_SEGMENT.fullmatch(part) for part in folder.split("/"))


def folder_url(folder: str) -> str:
    return external_url(f"{request.script_root}/browse/{folder}")


def crumbs_of(folder: str) -> list[tuple[str, str]]:
    """(name, address) of every folder from the top to `folder`."""
    parts = folder.split("/") if folder else []
    return [(part, folder_url("/".join(parts[: i + 1]))) for i, part in enumerate(parts)]


def record_items(rows: list[Any], today: Any) -> list[RecordItem]:
    """The items of a list of records, each with its cover where the public may download its
    content (one query for all of them)."""
    public = [row for row in rows if access.public_now(row, today)]
    found = covers.shown_for(public)
    items = [record_item(row, today) for row in rows]
    for item, row in zip(items, rows, strict=True):
        item.cover = covers.shown_at(found.get(row.id), item.url)
    return items


def record_item(row: Any, today: Any) -> RecordItem:
    return RecordItem(
        url=external_url(f"{request.script_root}/records/{row.id}"),
        title=title_of(row),
        file_name=clean_text(row.original_name),
        mime_type=row.mime_type,
        size_text=size_text(row.size),
        published=access.publication_date(row),
        embargo_until=row.sperrfrist if access.embargo_active(row, today) else None,
        folder=clean_text(row.path),
    )


@bp.app_context_processor
def _language_links() -> dict[str, Any]:
    return {"language_url": i18n.language_url}


# --- sub-folders --------------------------------------------------------------------------


def _released_paths() -> Select[Any]:
    counts = FilePathCount
    return select(counts.path).where(counts.freigabe.is_(True), counts.n > 0, counts.path != "")


def _first_path(prefix: str, low: str, high: str | None, *, inclusive: bool) -> str | None:
    """The first released path (in byte order) starting with `prefix`, from `low` and below
    `high`. Paths are ASCII (app/schemas/field_types.py), so byte order is code point order;
    PostgreSQL compares with the byte-wise pattern operators whatever the database's collation."""
    postgres = db.session.get_bind().dialect.name == "postgresql"
    query = _first_path_query(postgres, inclusive, high is not None, bool(prefix))
    escaped = prefix.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_")
    return db.session.scalar(query, {"low": low, "high": high, "like": escaped + "%"})


@functools.cache
def _first_path_query(postgres: bool, inclusive: bool, bounded: bool, in_prefix: bool) -> Any:
    """The statement of `_first_path`, built once per shape (a folder page makes dozens of
    these lookups, and building a statement costs more than running it)."""
    column: Any = FilePathCount.path
    low, high = bindparam("low", type_=String), bindparam("high", type_=String)
    if postgres:
        # The byte-wise operators of the text_pattern_ops index (migration 0005).
        query = _released_paths().where(column.op("~>=~" if inclusive else "~>~")(low))
        if bounded:
            query = query.where(column.op("~<~")(high))
        order: Any = text("file_path_counts.path USING ~<~")
    else:  # SQLite compares bytes (BINARY)
        query = _released_paths().where(column >= low if inclusive else column > low)
        if bounded:
            query = query.where(column < high)
        order = column
    if in_prefix:
        query = query.where(column.like(bindparam("like", type_=String), escape="\\"))
    return query.order_by(order).limit(1)


def _next_child(prefix: str, after: str | None) -> str | None:
    """The first sub-folder name of the folder `prefix` after the name `after` (byte order).

    The paths inside a child `c` are `c` itself and `c/...`, which lie in [c/, c0) in byte
    order ('0' follows '/'), so the first path outside them after `c` is one or two index
    lookups away. Its child is the next name unless a shorter name that it starts with, cut
    before a '-' or '.' (which sort before '/'), holds only sub-folders: `a/x` comes after
    `a-b` in byte order, but the name `a` before `a-b`. One lookup per such cut, and after
    `a-b` one more to step over `a/...`.
    """
    if after is None:
        candidates = [_first_path(prefix, prefix, None, inclusive=True)]
    else:
        name = prefix + after
        candidates = [
            _first_path(prefix, name, name + "/", inclusive=False),
            _first_path(prefix, name + "0", None, inclusive=True),
        ]
    while True:
        found = [path for path in candidates if path is not None]
        if not found:
            return None
        child = min(found)[len(prefix) :].split("/", 1)[0]
        if after is None or child > after:
            break
        # A name `after` starts with, cut before '-' or '.': its sub-folders' paths sort after.
        candidates = [_first_path(prefix, prefix + child + "0", None, inclusive=True)]
    for cut, char in enumerate(child):
        shorter = child[:cut]
        if char in "-." and shorter and (after is None or shorter > after):
            inside = prefix + shorter + "/"
            if _first_path(prefix, inside, prefix + shorter + "0", inclusive=True):
                return shorter
    return child


def child_folders(folder: str, after: str | None, size: int) -> tuple[list[str], str | None]:
    """Up to `size` sub-folder names of `folder` after the name `after`, and the name to go on
    after (None when no more follow)."""
    prefix = folder + "/" if folder else ""
    names: list[str] = []
    current = after
    while (current := _next_child(prefix, current)) is not None:
        if len(names) == size:
            return names, names[-1]
        names.append(current)
    return names, None


def folder_exists(folder: str) -> bool:
    """Whether a released record lies in `folder` or below it."""
    if not folder:
        return True
    if _first_path("", folder, folder + "/", inclusive=True) == folder:
        return True
    return _first_path(folder + "/", folder + "/", None, inclusive=True) is not None


# --- records of one folder ----------------------------------------------------------------


def folder_records(folder: str, after: Position | None, size: int) -> tuple[list[Any], bool]:
    """The newest `size` released records whose folder is exactly `folder` (records without
    a folder at the top), after `after`; and whether more follow. An index range read of
    ix_file_records_path (path, freigabe, created_at)."""
    in_folder = (
        FileRecord.path == folder
        if folder
        else or_(FileRecord.path.is_(None), FileRecord.path == "")
    )
    query = select(*FileRecord.__table__.columns).where(access.visible(None), in_folder)
    if after is not None:
        query = query.where(before(after))
    rows = list(db.session.execute(query.order_by(*NEWEST_FIRST).limit(size + 1)))
    return rows[:size], len(rows) > size


def _folder_arg(name: str) -> str | None:
    value = request.args.get(name)
    if value is None:
        return None
    if not PATH_SEGMENT.fullmatch(value):
        raise BadPageRequest()
    return value


@bp.get("/browse/", defaults={"folder": ""})
@bp.get("/browse/<path:folder>")
def browse(folder: str) -> Response:
    if folder and not valid_folder(folder):
        raise RecordNotFound()
    if not folder_exists(folder):
        raise RecordNotFound()
    today = access.today()
    children, more_folders = child_folders(folder, _folder_arg("folders_after"), PAGE_SIZE)
    rows, more = folder_records(folder, cursor_arg("cursor"), PAGE_SIZE)
    here = request.path
    prefix = folder + "/" if folder else ""
    page = FolderPage(
        folder=folder,
        crumbs=crumbs_of(folder),
        children=[(name, folder_url(prefix + name)) for name in children],
        more_folders=page_url(here, folders_after=more_folders) if more_folders else None,
        records=record_items(rows, today),
        older=page_url(here, cursor=encode_cursor(position_of(rows[-1]))) if more else None,
    )
    feed_args = [("path", prefix)] if folder else None
    page.feeds.append(
        (external_url("/api/public/feed.atom", feed_args), "application/atom+xml", _("Neu hier"))
    )
    if any(row.mime_type.partition("/")[0] in ("audio", "video") for row in rows):
        page.feeds.append(
            (external_url("/api/public/podcast.rss", feed_args), "application/rss+xml", "Podcast")
        )
    return Response(render_page("pages/browse.html", page=page))


# --- search -------------------------------------------------------------------------------


@dataclass(slots=True)
class SearchPage:
    query: str
    message: str | None = None
    results: list[RecordItem] = field(default_factory=list)
    total: int = 0
    number: int = 1
    previous: str | None = None
    next: str | None = None


@bp.get("/search")
@answers.cached(i18n.page_language)
def search() -> Response:
    """The public search (`/api/public/files?q=`), its ranking and visibility, as a page."""
    text = request.args.get("q")
    page = SearchPage(query=text or "")
    if text is None:
        return Response(render_page("pages/search.html", page=page))
    if not text.strip():
        page.message = _("Bitte einen Suchbegriff eingeben.")
        return Response(render_page("pages/search.html", page=page))
    args = {"q": text, "page": request.args.get("page", "1")}
    try:
        params = load(public_list_query_schema, args)
    except ValidationFailed as failed:
        # The API's reason is English; the page says what it can in the reader's language.
        del failed
        page.message = _(
            "Diese Suche ist nicht verständlich (etwa ein Anführungszeichen ohne Gegenstück "
            "oder eine falsche Seitenzahl)."
        )
        return Response(render_page("pages/search.html", page=page), status=400)
    if params["page"] > MAX_SEARCH_PAGE:
        page.message = _("So weit blättert die Suche nicht; bitte die Suche eingrenzen.")
        return Response(render_page("pages/search.html", page=page), status=400)
    found = paginate(Listing.of(None, params), params["page"], PAGE_SIZE)
    today = access.today()
    page.results = record_items(list(found.items), today)
    page.total, page.number = found.total, found.page
    if found.page > 1:
        page.previous = page_url("/search", q=text, page=str(found.page - 1))
    shown = (found.page - 1) * PAGE_SIZE + len(found.items)
    if shown < found.total and found.page < MAX_SEARCH_PAGE:
        page.next = page_url("/search", q=text, page=str(found.page + 1))
    if not found.items:
        page.message = _("Nichts gefunden.")
    return Response(render_page("pages/search.html", page=page))
