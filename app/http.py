"""Small request helpers shared by the blueprints: bounded JSON bodies, schema loading, the
service's own addresses and the caching of answers."""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any
from urllib.parse import urlencode

from flask import current_app, g, has_request_context, request
from marshmallow import Schema, ValidationError
from werkzeug.exceptions import RequestEntityTooLarge

from app.exceptions import ValidationFailed

#: The public answers' caching (the API's public paths, the pages, public downloads and
#: archives): shared caches may keep an answer but must ask again before reuse.
PUBLIC_CACHE = "public, max-age=0, must-revalidate"
#: An authenticated download's: no cache keeps it.
PRIVATE_CACHE = "private, no-store"

_UNSET = object()


def json_body() -> Any:
    """The request body as JSON (or a plain form), read at most `MAX_JSON_BODY` bytes deep.

    Form-encoded bodies are accepted too, as Laravel accepted them from older clients.
    """
    cached = g.get("json_body", _UNSET)
    if cached is not _UNSET:
        return cached
    limit = current_app.config["MAX_JSON_BODY"]
    if request.content_length is not None and request.content_length > limit:
        raise RequestEntityTooLarge(f"A JSON body may be at most {limit} bytes.")
    if request.mimetype in ("application/x-www-form-urlencoded", "multipart/form-data"):
        body: Any = request.form.to_dict()
    else:
        raw = request.stream.read(limit + 1)
        if len(raw) > limit:
            raise RequestEntityTooLarge(f"A JSON body may be at most {limit} bytes.")
        if not raw.strip():
            body = {}
        else:
            try:
                body = json.loads(raw)
            except (ValueError, UnicodeDecodeError):
                raise ValidationFailed({"body": ["The request body must be valid JSON."]}) from None
            except RecursionError:
                raise ValidationFailed(
                    {"body": ["The request body is nested too deeply."]}
                ) from None
    g.json_body = body
    return body


def flatten_errors(messages: Any, prefix: str = "") -> dict[str, list[str]]:
    """Marshmallow's nested messages as `{"field": [...]}`, nested keys joined by dots."""
    if isinstance(messages, list):
        return {prefix or "body": [str(m) for m in messages]}
    flat: dict[str, list[str]] = {}
    for key, value in messages.items():
        name = "body" if key == "_schema" else str(key)
        flat.update(flatten_errors(value, f"{prefix}.{name}" if prefix else name))
    return flat


def load(schema: Schema, data: Any, **kwargs: Any) -> dict[str, Any]:
    try:
        return schema.load(data, **kwargs)
    except ValidationError as exc:
        raise ValidationFailed(flatten_errors(exc.messages)) from None


def validate(schema: Schema, data: Any) -> tuple[dict[str, Any], dict[str, list[str]]]:
    """Like `load`, but hands back the errors, for callers that gather errors from elsewhere."""
    try:
        return schema.load(data), {}
    except ValidationError as exc:
        valid = exc.valid_data if isinstance(exc.valid_data, dict) else {}
        return valid, flatten_errors(exc.messages)


def base_url() -> str:
    """Where clients reach this service, without a trailing slash: `PUBLIC_BASE_URL`; else the
    request's host when it is trusted (listed in `TRUSTED_HOSTS`, which Flask checks, or set
    by the `PROXY_COUNT` proxies in front). Once any of these is set, a `Host` header nobody
    vouched for never reaches a link: it would put an attacker's links into cached answers.
    With none set, links use the host the client asked for, so that they work out of the box
    (the trade-off is in docs/security.md); the server's own name only without a valid one.
    Worked out once per request (a landing page has about twenty links)."""
    known = request.environ.get(_BASE_URL) if has_request_context() else None
    if known is None:
        known = _base_url()
        if has_request_context():
            request.environ[_BASE_URL] = known
    return known


#: Where `base_url` keeps its answer for the rest of a request.
_BASE_URL = "file_repository.base_url"


def _base_url() -> str:
    config = current_app.config
    if config.get("PUBLIC_BASE_URL"):
        return str(config["PUBLIC_BASE_URL"]).rstrip("/")
    if links_follow_any_host(config) and not request.host:
        environ = request.environ
        scheme, port = environ["wsgi.url_scheme"], str(environ.get("SERVER_PORT", ""))
        default_port = {"http": "80", "https": "443"}.get(scheme)
        host = environ["SERVER_NAME"] + ("" if port in ("", default_port) else f":{port}")
        return f"{scheme}://{host}"
    return request.host_url.rstrip("/")


def links_follow_any_host(config: Mapping[str, Any]) -> bool:
    """True when the operator named no address: links then follow the request's `Host`."""
    return not (
        config.get("PUBLIC_BASE_URL") or config.get("TRUSTED_HOSTS") or config.get("PROXY_COUNT")
    )


def external_url(path: str, args: list[tuple[str, str]] | None = None) -> str:
    """An absolute URL of `path` (from the server's root, as `url_for` gives it) on this
    service, for links in answers."""
    query = f"?{urlencode(args)}" if args else ""
    return f"{base_url()}{path}{query}"


def absolute_url(path: str) -> str:
    """An absolute URL of `path` with no query, for the links of feeds and OAI-PMH answers."""
    return external_url(path)


def if_match() -> frozenset[str] | None:
    """The strong entity tags of the request's If-Match (RFC 9110 13.1.1), or None when it
    has none or `*` (no precondition on an existing resource). Weak tags never match."""
    if "If-Match" not in request.headers or request.if_match.star_tag:
        return None
    return frozenset(request.if_match.as_set(include_weak=False))
