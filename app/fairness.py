"""Readers first: the heavy public answers (OAI-PMH, the public list, search, browsing, series,
feeds, sitemaps) hold at most `HEAVY_REQUESTS` of a process's request threads at once, and one
client at most half of those, so that a harvester, however many connections it opens, leaves
the other threads to the readers of landing pages, records and downloads.

A heavy request beyond its share is answered at once with 503 and `Retry-After`, which is how
OAI-PMH asks a harvester to come back (the protocol's flow control), in the API's JSON error
shape (an HTML error page on the pages). The slot is taken before the view runs and given back
when the request ends. docs/harvesting.md tells operators.
"""

from __future__ import annotations

import threading
from collections.abc import Mapping
from typing import Any

from flask import Flask, Response, g, request

from app.errors import error_response

#: The endpoints whose answers read many records (or build large bodies) for one request.
HEAVY_ENDPOINTS = frozenset(
    {
        "oai.endpoint",
        "oai.form_endpoint",
        "public.list_released",
        "feeds.atom_feed",
        "feeds.podcast_feed",
        "pages.search",
        "pages.browse",
        "pages.series",
        "pages.sitemap",
        "pages.sitemap_part",
    }
)
RETRY_AFTER_SECONDS = 2


def heavy_slots(config: Mapping[str, Any]) -> int:
    """`HEAVY_REQUESTS`, or with 0 a quarter of `SERVER_THREADS` (at least one)."""
    return config["HEAVY_REQUESTS"] or max(1, config["SERVER_THREADS"] // 4)


class HeavyGate:
    """The heavy requests in flight in this process, in all and per client address: one
    client holds at most half of the slots (at least one), so a second harvester or a
    reader's search still finds one."""

    def __init__(self, slots: int) -> None:
        self.slots, self.per_client = slots, max(1, slots // 2)
        self.lock = threading.Lock()
        self.held: dict[str, int] = {}

    def enter(self, client: str) -> bool:
        with self.lock:
            full = sum(self.held.values()) >= self.slots
            if full or self.held.get(client, 0) >= self.per_client:
                return False
            self.held[client] = self.held.get(client, 0) + 1
            return True

    def leave(self, client: str) -> None:
        with self.lock:
            self.held[client] -= 1
            if not self.held[client]:
                del self.held[client]


def init_app(app: Flask) -> None:
    """Wire the gate of heavy requests into ``app``."""
    gate = HeavyGate(heavy_slots(app.config))

    @app.before_request
    def take_heavy_slot() -> Response | None:
        if request.endpoint not in HEAVY_ENDPOINTS:
            return None
        client = request.remote_addr or ""
        if not gate.enter(client):
            message = "Service unavailable: busy with other heavy requests. Try again later."
            response = error_response(503, message)
            response.headers["Retry-After"] = str(RETRY_AFTER_SECONDS)
            return response
        g.heavy_client = client
        return None

    @app.teardown_request
    def give_heavy_slot_back(exc: BaseException | None) -> None:
        client = g.pop("heavy_client", None)
        if client is not None:
            gate.leave(client)
