"""OAI-PMH 2.0 at GET|POST /oai: the six verbs over released records, `oai_dc` and
`oai_datacite` metadata (app/oai/datacite.py), sets from the folders of `path` and the series,
persistent deletions, keyset resumption tokens.

Protocol errors are answers too (HTTP 200 with an `<error>` element), as the protocol says.
"""

from __future__ import annotations

import base64
import json
import re
import uuid
from dataclasses import dataclass
from datetime import UTC, date, datetime, timedelta
from typing import Any

from flask import Response, current_app, g, request, url_for
from lxml import etree

from app.database import read_without_transaction
from app.docs.openapi import NO_TOKEN, SERVER, Blueprint
from app.doi import lookup
from app.doi import services as doi_services
from app.files import access, answers, relations
from app.http import absolute_url
from app.oai import datacite, harvest
from app.oai import xml as oai_xml
from app.oai.identifiers import identifier_of
from app.oai.identifiers import namespace as oai_namespace
from app.schemas.attribution import SERIES_SET, SLUG_FORM, series_line

bp = Blueprint("oai", __name__, tag="Harvesting", errors=SERVER, security=NO_TOKEN)
bp.before_request(read_without_transaction)


PAGE_SIZE = 200
# Tokens this service issues stay far below this; a longer one is forged.
MAX_TOKEN_LENGTH = 1024
TOKEN_LIFETIME = timedelta(hours=24)
XML_TYPE = "text/xml; charset=utf-8"
#: The comment a list page's kept items replace (app/files/answers.py keeps them: the page
#: around them, its responseDate and its token's expiry, is made afresh).
ITEMS = "items"

LIST_ARGUMENTS = ({"metadataPrefix"}, {"from", "until", "set"})
VERBS: dict[str, tuple[set[str], set[str]]] = {
    "Identify": (set(), set()),
    "ListMetadataFormats": (set(), {"identifier"}),
    "ListSets": (set(), set()),
    "GetRecord": ({"identifier", "metadataPrefix"}, set()),
    "ListIdentifiers": LIST_ARGUMENTS,
    "ListRecords": LIST_ARGUMENTS,
}
RESUMABLE = {"ListSets", "ListIdentifiers", "ListRecords"}
DAY = re.compile(r"[0-9]{4}-[0-9]{2}-[0-9]{2}")
SECOND = re.compile(r"[0-9]{4}-[0-9]{2}-[0-9]{2}T[0-9]{2}:[0-9]{2}:[0-9]{2}Z")
SET_SPEC = re.compile(r"[A-Za-z0-9._-]+(?::[A-Za-z0-9._-]+)*")

# --- the OpenAPI operations of GET and POST /oai
ARGUMENTS = {
    "verb": {
        "type": "string",
        "enum": list(VERBS),
        "description": "The OAI-PMH request.",
    },
    "identifier": {"type": "string", "description": "oai:<OAI_NAMESPACE>:<record id>"},
    "metadataPrefix": {"type": "string", "description": "oai_dc or oai_datacite."},
    "from": {"type": "string", "description": "YYYY-MM-DD or YYYY-MM-DDThh:mm:ssZ (UTC)."},
    "until": {"type": "string", "description": "Same granularity as from; inclusive."},
    "set": {"type": "string", "description": "A folder (segments joined by ':') or series~<slug>."},
    "resumptionToken": {"type": "string", "description": "From the previous answer; alone."},
}
ANSWERS = {
    "200": {
        "description": (
            "An OAI-PMH 2.0 answer; protocol errors (badVerb, badArgument, "
            "cannotDisseminateFormat, idDoesNotExist, noRecordsMatch, badResumptionToken, "
            "noSetHierarchy) are answers too, with an `<error code>` element."
        ),
        "content": {"text/xml": {"schema": {"type": "string"}}},
    },
}


class ProtocolError(Exception):
    def __init__(self, code: str, message: str) -> None:
        super().__init__(message)
        self.code = code
        self.message = message


def _base_url() -> str:
    """Built once per request: every identifier of a page repeats its host."""
    if "oai_base_url" not in g:
        g.oai_base_url = absolute_url(url_for("oai.endpoint"))
    return g.oai_base_url


def _public_files_url() -> str:
    """Where the public record URLs start (`/api/public/files`), once per request."""
    if "oai_public_files_url" not in g:
        g.oai_public_files_url = absolute_url(url_for("public.list_released"))
    return g.oai_public_files_url


def _series_titles() -> dict[str, str]:
    """Every series' title by slug, read once per request (series are few)."""
    if "oai_series" not in g:
        g.oai_series = {slug: title for slug, title in harvest.series_sets(bare=True)}
    return g.oai_series


def _record_id(identifier: str) -> uuid.UUID:
    prefix = f"oai:{oai_namespace()}:"
    try:
        if not identifier.startswith(prefix):
            raise ValueError(identifier)
        return uuid.UUID(identifier[len(prefix) :])
    except ValueError:
        raise ProtocolError("idDoesNotExist", f"No item has the identifier {identifier}.") from None


@bp.get("/oai", endpoint="endpoint")
@bp.doc(
    operationId="oaiPmhGet",
    responses=ANSWERS,
    parameters=[
        {"name": name, "in": "query", "required": name == "verb", "schema": schema}
        for name, schema in ARGUMENTS.items()
    ],
)
def endpoint() -> Response:
    """OAI-PMH request

    OAI-PMH 2.0 for harvesters: released records as `oai_dc` or `oai_datacite`, sets from the
    folders of `path` and the series, datestamps are `updated_at` in UTC seconds, deletions and
    unreleases stay as `<header status="deleted">` (persistent). Lists and sets come in pages
    with a `resumptionToken` (cursor, expirationDate after 24 hours; completeListSize for
    records).
    """
    return _answer_request(request.args)


@bp.post("/oai", endpoint="form_endpoint")
@bp.doc(
    operationId="oaiPmhPost",
    responses=ANSWERS,
    requestBody={
        "required": True,
        "content": {
            "application/x-www-form-urlencoded": {
                "schema": {"type": "object", "properties": ARGUMENTS, "required": ["verb"]}
            }
        },
    },
)
def form_endpoint() -> Response:
    """OAI-PMH request (form-encoded body)

    OAI-PMH 2.0 for harvesters: released records as `oai_dc` or `oai_datacite`, sets from the
    folders of `path` and the series, datestamps are `updated_at` in UTC seconds, deletions and
    unreleases stay as `<header status="deleted">` (persistent). Lists and sets come in pages
    with a `resumptionToken` (cursor, expirationDate after 24 hours; completeListSize for
    records).
    """
    return _answer_request(request.form)


def _answer_request(source: Any) -> Response:
    """The answer to the request's arguments (`source`: the query or the form body)."""
    arguments = {key: source.getlist(key) for key in source}
    try:
        verb, args = _check(arguments)
    except ProtocolError as exc:
        root = oai_xml.envelope(_base_url(), None)
        oai_xml.error(root, exc.code, exc.message)
        return _answer(root)
    root = oai_xml.envelope(_base_url(), {"verb": verb, **args})
    try:
        HANDLERS[verb](root, args)
    except ProtocolError as exc:
        oai_xml.error(root, exc.code, exc.message)
    return _answer(root)


def _answer(root: Any) -> Response:
    body = oai_xml.serialize(root)
    if "oai_items" in g:  # a list page's items as kept, put back in their place
        body = body.replace(f"<!--{ITEMS}-->".encode(), g.oai_items, 1)
    elif "oai_keep" in g and len(root) > 2 and root[2].tag != f"{{{oai_xml.OAI}}}error":
        key, state, rest = g.oai_keep
        verb = etree.QName(root[2]).localname
        start = body.index(f"<{verb}>".encode()) + len(verb) + 2
        end = body.rfind(b"<resumptionToken")
        items = body[start : end if end >= 0 else body.rindex(f"</{verb}>".encode())]
        answers.keep(key, state, (items, *rest), len(items))
    return Response(body, content_type=XML_TYPE)


def _check(arguments: dict[str, list[str]]) -> tuple[str, dict[str, str]]:
    verbs = arguments.pop("verb", [])
    if len(verbs) != 1 or verbs[0] not in VERBS:
        raise ProtocolError("badVerb", "The verb argument is missing, repeated or not legal.")
    verb = verbs[0]
    repeated = sorted(key for key, values in arguments.items() if len(values) > 1)
    if repeated:
        raise ProtocolError("badArgument", f"Repeated argument: {', '.join(repeated)}.")
    args = {key: values[0] for key, values in arguments.items()}
    required, optional = VERBS[verb]
    if "resumptionToken" in args and verb in RESUMABLE:
        if len(args) > 1:
            raise ProtocolError(
                "badArgument", "resumptionToken is an exclusive argument: send it alone."
            )
        return verb, args
    illegal = sorted(set(args) - required - optional)
    if illegal:
        raise ProtocolError("badArgument", f"Illegal argument: {', '.join(illegal)}.")
    missing = sorted(required - set(args))
    if missing:
        raise ProtocolError("badArgument", f"Missing argument: {', '.join(missing)}.")
    return verb, args


# --- the verbs --------------------------------------------------------------------------


def _identify(root: Any, _args: dict[str, str]) -> None:
    config = current_app.config
    earliest = harvest.earliest_datestamp() or datetime(1970, 1, 1, tzinfo=UTC)
    element = oai_xml.verb_element(root, "Identify")
    oai = oai_xml.OAI
    name = config.get("REPOSITORY_NAME") or "File repository"
    admin = config.get("OAI_ADMIN_EMAIL") or config.get("ADMIN_EMAIL") or f"admin@{oai_namespace()}"
    for tag, text in (
        ("repositoryName", name),
        ("baseURL", _base_url()),
        ("protocolVersion", "2.0"),
        ("adminEmail", admin),
        ("earliestDatestamp", oai_xml.datestamp(earliest)),
        ("deletedRecord", "persistent"),
        ("granularity", "YYYY-MM-DDThh:mm:ssZ"),
    ):
        oai_xml.sub(element, f"{{{oai}}}{tag}", text)
    description = oai_xml.sub(element, f"{{{oai}}}description")
    ident = oai_xml.etree.SubElement(
        description,
        "{http://www.openarchives.org/OAI/2.0/oai-identifier}oai-identifier",
        nsmap={None: "http://www.openarchives.org/OAI/2.0/oai-identifier"},
    )
    ident.set(
        f"{{{oai_xml.XSI}}}schemaLocation",
        f"http://www.openarchives.org/OAI/2.0/oai-identifier {oai_xml.IDENTIFIER_SCHEMA}",
    )
    ns = "{http://www.openarchives.org/OAI/2.0/oai-identifier}"
    oai_xml.sub(ident, f"{ns}scheme", "oai")
    oai_xml.sub(ident, f"{ns}repositoryIdentifier", oai_namespace())
    oai_xml.sub(ident, f"{ns}delimiter", ":")
    oai_xml.sub(ident, f"{ns}sampleIdentifier", identifier_of(uuid.UUID(int=0)))


def _list_metadata_formats(root: Any, args: dict[str, str]) -> None:
    if "identifier" in args and harvest.find(_record_id(args["identifier"])) is None:
        raise ProtocolError("idDoesNotExist", f"No item has the identifier {args['identifier']}.")
    element = oai_xml.verb_element(root, "ListMetadataFormats")
    for prefix, (schema, namespace) in oai_xml.METADATA_FORMATS.items():
        fmt = oai_xml.sub(element, f"{{{oai_xml.OAI}}}metadataFormat")
        oai_xml.sub(fmt, f"{{{oai_xml.OAI}}}metadataPrefix", prefix)
        oai_xml.sub(fmt, f"{{{oai_xml.OAI}}}schema", schema)
        oai_xml.sub(fmt, f"{{{oai_xml.OAI}}}metadataNamespace", namespace)


def _list_sets(root: Any, args: dict[str, str]) -> None:
    after, cursor = None, 0
    if "resumptionToken" in args:
        state = _decode_token(args["resumptionToken"], "ListSets")
        after, cursor = state["after"], state["cursor"]
    folders, resume_after = harvest.set_page(after, PAGE_SIZE)
    # The series (few, curated) come whole on the first page, before the folders.
    sets = harvest.series_sets() if after is None else []
    sets += [(folder.replace("/", ":"), folder) for folder in folders]
    if not sets and after is None:
        raise ProtocolError("noSetHierarchy", "No series, and no released record has a path.")
    if not sets:
        raise ProtocolError("badResumptionToken", "The sets changed: list them from the start.")
    element = oai_xml.verb_element(root, "ListSets")
    for spec, name in sets:
        entry = oai_xml.sub(element, f"{{{oai_xml.OAI}}}set")
        oai_xml.sub(entry, f"{{{oai_xml.OAI}}}setSpec", spec)
        oai_xml.sub(entry, f"{{{oai_xml.OAI}}}setName", name)
    if cursor == 0 and resume_after is None:
        return
    # No completeListSize: counting the sets would read them all.
    state = {"verb": "ListSets", "after": resume_after, "cursor": cursor + len(sets)}
    _resumption_token(element, cursor, None, resume_after, state)


def _resumption_token(
    parent: Any, cursor: int, size: int | None, more: Any, state: dict[str, Any]
) -> None:
    """The token closing a page: empty on the last page, else with the state of the next."""
    attributes = {"cursor": str(cursor)}
    if size is not None:
        attributes["completeListSize"] = str(size)
    token = oai_xml.sub(parent, f"{{{oai_xml.OAI}}}resumptionToken", **attributes)
    if more is None:
        return
    expires = datetime.now(UTC).replace(microsecond=0) + TOKEN_LIFETIME
    token.set("expirationDate", oai_xml.datestamp(expires))
    token.text = _encode_token({**state, "expires": expires.isoformat()})


def _check_prefix(prefix: str) -> None:
    if prefix not in oai_xml.METADATA_FORMATS:
        raise ProtocolError(
            "cannotDisseminateFormat", f"The metadata format {prefix} is not supported."
        )


def _get_record(root: Any, args: dict[str, str]) -> None:
    _check_prefix(args["metadataPrefix"])
    item = harvest.find(_record_id(args["identifier"]))
    if item is None:
        raise ProtocolError("idDoesNotExist", f"No item has the identifier {args['identifier']}.")
    element = oai_xml.verb_element(root, "GetRecord")
    context = _context(args["metadataPrefix"], [item])
    _write_item(element, item, context, with_metadata=True)


def _today() -> date:
    return access.today()


@dataclass(frozen=True)
class Context:
    """What the items of one answer share: the format, the day (embargoes), the records'
    DOIs and links and their linked records' DOIs (read once for the whole page)."""

    prefix: str
    today: date
    dois: dict[uuid.UUID, Any]
    links: dict[uuid.UUID, list[relations.Link]]
    linked_dois: dict[uuid.UUID, Any]


def _context(prefix: str, items: list[harvest.Item], with_metadata: bool = True) -> Context:
    live = [item.record for item in items if not item.deleted] if with_metadata else []
    links = relations.links_for(live, None)
    targets = [link.target.id for found in links.values() for link in found if link.target]
    return Context(
        prefix,
        _today(),
        lookup.dois_of(record.id for record in live),
        links,
        lookup.dois_of(targets),
    )


def _write_item(parent: Any, item: harvest.Item, context: Context, *, with_metadata: bool) -> None:
    """An item's header, and with its metadata its record in the context's format."""
    set_specs = [folder.replace("/", ":") for folder in harvest.parents(item.path)]
    if item.series is not None:
        set_specs.append(SERIES_SET + item.series)
    identifier = identifier_of(item.position[1])
    if not with_metadata:
        oai_xml.header(parent, identifier, item.position[0], set_specs, item.deleted)
        return
    record = oai_xml.sub(parent, f"{{{oai_xml.OAI}}}record")
    oai_xml.header(record, identifier, item.position[0], set_specs, item.deleted)
    if item.deleted:
        return
    record_id = item.position[1]
    doi = lookup.shown(context.dois.get(record_id))
    links = context.links.get(record_id, [])
    if context.prefix == "oai_datacite":
        datacite.oai_datacite(
            record,
            item.record,
            doi=doi,
            landing=_page_url(record_id),
            related=doi_services.related_of(
                item.record, links, context.linked_dois, landing=_page_url
            ),
            series=doi_services.series_of(item.record, _pages_base()),
        )
        return
    record_url = f"{_public_files_url()}/{record_id}"
    urls = {
        "doi": lookup.url(doi) if doi else "",
        "record": record_url,
        "download": f"{record_url}/download",
    }
    lines = []
    if item.series is not None and item.series in _series_titles():
        title = oai_xml.xml_text(_series_titles()[item.series])
        lines.append(series_line(title, item.record.series_number))
    lines += [_address(link, context) for link in links]
    oai_xml.oai_dc(record, item.record, urls, context.today, lines)


def _address(link: relations.Link, context: Context) -> str:
    """A link's address in Dublin Core: a linked record's DOI's where it shows one, else its
    public record's; a DOI's resolver address; a URL as it is."""
    if link.target is not None:
        doi = lookup.shown(context.linked_dois.get(link.target.id))
        return lookup.url(doi) if doi else f"{_public_files_url()}/{link.target.id}"
    return lookup.url(link.identifier) if link.identifier_type == "DOI" else link.identifier


def _pages_base() -> str:
    """Where the landing pages are (`/records/...`, `/series/...`), once per request."""
    if "oai_pages_base" not in g:
        g.oai_pages_base = absolute_url(request.script_root or "")
    return g.oai_pages_base


def _page_url(record_id: uuid.UUID) -> str:
    return f"{_pages_base()}/records/{record_id}"


def _parse_moment(value: str, name: str) -> tuple[datetime, str]:
    try:
        if DAY.fullmatch(value):
            return datetime.fromisoformat(value).replace(tzinfo=UTC), "day"
        if SECOND.fullmatch(value):
            return datetime.strptime(value, "%Y-%m-%dT%H:%M:%SZ").replace(tzinfo=UTC), "second"
    except ValueError:
        pass
    raise ProtocolError(
        "badArgument",
        f"The {name} argument must be YYYY-MM-DD or YYYY-MM-DDThh:mm:ssZ (UTC).",
    )


def _window(args: dict[str, str]) -> harvest.Window:
    start = end = None
    granularities = set()
    if "from" in args:
        start, granularity = _parse_moment(args["from"], "from")
        granularities.add(granularity)
    if "until" in args:
        until, granularity = _parse_moment(args["until"], "until")
        granularities.add(granularity)
        # until is inclusive at its own granularity; the last moment of year 9999 has no
        # moment after it to end before, so it bounds nothing.
        step = timedelta(days=1) if granularity == "day" else timedelta(seconds=1)
        end = until + step if until <= datetime.max.replace(tzinfo=UTC) - step else None
    if len(granularities) > 1:
        raise ProtocolError("badArgument", "from and until must have the same granularity.")
    if start is not None and end is not None and start >= end:
        raise ProtocolError("badArgument", "from must not be later than until.")
    folder = series = None
    if args.get("set", "").startswith(SERIES_SET):
        series = args["set"].removeprefix(SERIES_SET)
        if not SLUG_FORM.fullmatch(series):
            raise ProtocolError("noRecordsMatch", f"There is no set {args['set']}.")
    elif "set" in args:
        if not SET_SPEC.fullmatch(args["set"]):
            raise ProtocolError("noRecordsMatch", f"There is no set {args['set']}.")
        folder = args["set"].replace(":", "/")
    return harvest.Window(folder, start, end, series)


def _encode_token(state: dict[str, Any]) -> str:
    return base64.urlsafe_b64encode(json.dumps(state, separators=(",", ":")).encode()).decode()


def _decode_token(token: str, verb: str) -> dict[str, Any]:
    """The state of a token this service issued for `verb`; anything else, however forged
    (wrong types, deep nesting, dates beyond the calendar), is badResumptionToken."""
    try:
        if len(token) > MAX_TOKEN_LENGTH:
            raise ValueError(token)
        state = json.loads(base64.urlsafe_b64decode(token.encode("ascii")))
        if not isinstance(state, dict) or state.get("verb") != verb:
            raise ValueError(token)
        state["expires"] = _moment(state["expires"])
        if not _count(state["cursor"]):
            raise ValueError(token)
        if verb == "ListSets":
            if not isinstance(state["after"], str):
                raise ValueError(token)
        else:
            stamp, record_id = state["after"]
            if not isinstance(record_id, str) or not _count(state["size"]):
                raise ValueError(token)
            state["after"] = (_moment(stamp), uuid.UUID(record_id))
            arguments = {k: state[k] for k in ("from", "until", "set") if state.get(k) is not None}
            if not all(isinstance(value, str) for value in arguments.values()):
                raise ValueError(token)
            state["window"] = _window(arguments)
            state["prefix"] = state.get("prefix", "oai_dc")
            if state["prefix"] not in oai_xml.METADATA_FORMATS:
                raise ValueError(token)
    except (ValueError, KeyError, TypeError, UnicodeError, OverflowError, RecursionError):
        raise ProtocolError("badResumptionToken", "The resumptionToken is not valid.") from None
    except ProtocolError:
        raise ProtocolError("badResumptionToken", "The resumptionToken is not valid.") from None
    if state["expires"] <= datetime.now(UTC):
        raise ProtocolError("badResumptionToken", "The resumptionToken has expired.")
    return state


def _moment(value: Any) -> datetime:
    """An ISO 8601 instant with its offset, as a token holds it, in UTC."""
    if not isinstance(value, str):
        raise TypeError(value)
    moment = datetime.fromisoformat(value)
    if moment.tzinfo is None:
        raise ValueError(value)
    return moment.astimezone(UTC)


def _count(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and value >= 0


def _list(root: Any, args: dict[str, str], verb: str) -> None:
    if "resumptionToken" in args:
        state = _decode_token(args["resumptionToken"], verb)
        query = {k: state[k] for k in ("from", "until", "set") if state.get(k) is not None}
        window, after = state["window"], state["after"]
        cursor, size, prefix = state["cursor"], state["size"], state["prefix"]
    else:
        prefix = args["metadataPrefix"]
        _check_prefix(prefix)
        window, after, cursor, size = _window(args), None, 0, None
        query = {k: args[k] for k in ("from", "until", "set") if k in args}
    key = ("oai", verb, prefix, window, after, absolute_url(""), request.script_root)
    found = answers.lookup(key) if answers.cacheable_request() else None
    kept = found[0] if found is not None else None
    element = oai_xml.verb_element(root, verb)
    if kept is not None:
        g.oai_items, last, more, counted, shown = kept
        element.append(etree.Comment(ITEMS))
    else:
        counted = harvest.count(window) if size is None else None
        items, more = harvest.page(window, after, PAGE_SIZE)
        if not items:
            raise ProtocolError("noRecordsMatch", "No records match these arguments.")
        with_metadata = verb == "ListRecords"
        context = _context(prefix, items, with_metadata)
        for item in items:
            _write_item(element, item, context, with_metadata=with_metadata)
        last, shown = items[-1].position, len(items)
        if found is not None:
            # Kept by `_answer` once the items are written out.
            g.oai_keep = (key, found[1], (last, more, counted, shown))
    size = counted if size is None else size
    if cursor == 0 and not more:
        return
    state = {
        "verb": verb,
        **query,
        # Tokens issued before there was a second format name none: oai_dc.
        **({"prefix": prefix} if prefix != "oai_dc" else {}),
        "after": [last[0].astimezone(UTC).isoformat(), str(last[1])],
        "cursor": cursor + shown,
        "size": size,
    }
    _resumption_token(element, cursor, size, last if more else None, state)


HANDLERS = {
    "Identify": _identify,
    "ListMetadataFormats": _list_metadata_formats,
    "ListSets": _list_sets,
    "GetRecord": _get_record,
    "ListIdentifiers": lambda root, args: _list(root, args, "ListIdentifiers"),
    "ListRecords": lambda root, args: _list(root, args, "ListRecords"),
}
