"""What the doors hand to the statistics, and the rules' fixed numbers."""

from __future__ import annotations

import uuid
from dataclasses import dataclass

#: The ways a record's content leaves the service, counted apart.
DOORS = ("public", "account", "link")
#: Views of a record's landing page (COUNTER "investigations" that are not requests), kept in
#: the same per-day rows under this door and read apart from the downloads.
PAGE = "page"
#: The answers that hand out content (COUNTER: successful and conditional requests).
COUNTED_STATUSES = frozenset({200, 206, 304})
#: COUNTER's double-click window: a repeat within it is the same request.
DOUBLE_CLICK_SECONDS = 30


@dataclass(frozen=True, slots=True)
class Download:
    """One answered download (or page view, door `page`) as it was asked; address and
    User-Agent only live in memory until the flush turns them into the day's salted hash."""

    at: float
    record_id: uuid.UUID
    door: str
    user_id: int | None
    address: str
    user_agent: str
