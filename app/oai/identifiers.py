"""OAI-PMH identifiers: `oai:<OAI_NAMESPACE>:<record id>`, for the endpoint and the pages."""

from __future__ import annotations

import uuid

from flask import current_app


def namespace() -> str:
    """`OAI_NAMESPACE`: identifiers must not change with the address a harvester uses."""
    return current_app.config["OAI_NAMESPACE"]


def identifier_of(record_id: uuid.UUID) -> str:
    return f"oai:{namespace()}:{record_id}"
