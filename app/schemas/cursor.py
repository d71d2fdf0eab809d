"""The opaque keyset cursor of list pages: a place in list order (created_at, id)."""

from __future__ import annotations

import base64
import uuid
from datetime import UTC, datetime


def encode_cursor(position: tuple[datetime, uuid.UUID]) -> str:
    """An opaque, URL-safe token for a place in list order."""
    created_at, record_id = position
    raw = f"{created_at.astimezone(UTC).isoformat()}|{record_id}".encode()
    return base64.urlsafe_b64encode(raw).decode().rstrip("=")


def decode_cursor(token: str) -> tuple[datetime, uuid.UUID]:
    padded = token + "=" * (-len(token) % 4)
    created, _, record_id = base64.urlsafe_b64decode(padded.encode("ascii")).decode().partition("|")
    moment = datetime.fromisoformat(created)
    if moment.tzinfo is None:
        raise ValueError(token)
    try:
        return moment.astimezone(UTC), uuid.UUID(record_id)
    except OverflowError:
        raise ValueError(token) from None
