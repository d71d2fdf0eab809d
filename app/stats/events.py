"""What the doors hand to the statistics, and the rules' fixed numbers."""

from __future__ import annotations

import uuid
from dataclasses import dataclass

#: The ways a record's content leaves the service, counted apart.
DOORS = ("public", "account", "link")
#: Views of a record's landing page (COUNTER "investigations" that are not requests), kept in
#: the same per-day rows under this door and read apart from the downloads.
PAGE = "page"
#: The download answers that hand out content: a 304 hands out nothing (the client keeps its
#: copy), so revalidating in a loop counts nothing (issue 36, finding 9).
DOWNLOAD_STATUSES = frozenset({200, 206})
#: A landing page is viewed whether it comes whole or from the reader's cache.
VIEW_STATUSES = frozenset({200, 304})
#: The door public figures count (public statistics, the landing page's reach): the account
#: and link doors can fetch content before the public may (an owner, the press under
#: embargo), so their counts are the owner's and administrators' to see (issue 36, 10).
PUBLIC_DOOR = "public"
#: Characters of a User-Agent the classification reads: matching the COUNTER lists costs
#: time in proportion to the length, and no browser sends a tenth of this. A longer one is
#: classified as a machine without being matched (docs/security.md, issue 36, finding 3).
MAX_USER_AGENT = 512
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
