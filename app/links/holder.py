"""The holder's side of a share link, the rules of every address that carries its secret: where
they are (the API's and the holder's page), the headers of their answers, the rate limit of
failed lookups, and opening the link. Used by routes.py, the holder's page (app/pages/holder.py
and the pages' headers) and the factory, which hands the prefixes to the access log."""

from __future__ import annotations

from flask import Response, current_app, request
from flask_limiter.util import get_remote_address

from app.access_log import SHARE_LINK_ENVIRON
from app.extensions import limiter
from app.links import services

#: The API's addresses of a link: `/api/shared/<secret>` and below.
SHARED_PREFIX = "/api/shared/"
#: The holder's HTML page (app/pages/holder.py), which a link's `url` names.
PAGE_PREFIX = "/s/"
#: Every address whose next path segment is a secret (the access log writes the link's id).
SECRET_PREFIXES = (SHARED_PREFIX, PAGE_PREFIX)

#: What every answer through a link carries (errors too): the secret is in the address, so
#: no Referer may carry it on, no cache may keep the answer and no search engine may list it.
HOLDER_HEADERS = {
    "Referrer-Policy": "no-referrer",
    "Cache-Control": "private, no-store",
    "X-Robots-Tag": "noindex",
}


def is_holder_page(path: str) -> bool:
    """A share link's page: its address carries the secret."""
    return path.startswith(PAGE_PREFIX)


def with_holder_headers(response: Response) -> Response:
    """`response` with the holder's headers when it answers an API address of a link."""
    if request.path.startswith(SHARED_PREFIX):
        response.headers.update(HOLDER_HEADERS)
    return response


def _failure_rate() -> str:
    return current_app.config["RATELIMIT_SHARE_LINK_FAILURES"]


# Only failed lookups count (an unknown or revoked secret), per client address: guessing is
# throttled, a holder with a good link is not. Once over the limit every holder request of
# that address waits, so a guesser cannot probe with valid ones in between.
failures_limited = limiter.shared_limit(
    _failure_rate,
    scope="share-link-failures",
    key_func=get_remote_address,
    deduct_when=lambda response: response.status_code == 404,
)


def open_link(secret: str) -> services.OpenLink:
    """The link of `secret` (raises as `services.resolve` does); the access log names it."""
    link = services.resolve(secret)
    request.environ[SHARE_LINK_ENVIRON] = str(link.id)
    return link
