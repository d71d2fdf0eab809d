"""Liveness and readiness probes for load balancers and orchestrators (no token needed)."""

from __future__ import annotations

import logging

from flask import current_app
from sqlalchemy import select
from sqlalchemy.exc import SQLAlchemyError

from app.docs.openapi import NO_TOKEN, Blueprint
from app.extensions import db
from app.storage import StorageError

bp = Blueprint("health", __name__, tag="Operations")
log = logging.getLogger(__name__)

NO_STORE = {"Cache-Control": "no-store"}


def _object(**properties: object) -> dict[str, object]:
    return {"type": "object", "properties": properties, "required": list(properties)}


CHECK = {"type": "string", "enum": ["ok", "fail"]}
CHECKS = _object(database=CHECK, storage=CHECK)


@bp.get("/healthz")
@bp.doc(operationId="getHealth", security=NO_TOKEN)
@bp.alt_response(200, schema=_object(status={"const": "ok"}), description="Alive.")
def healthz():
    """Liveness: the process answers (dependencies are not checked)"""
    return {"status": "ok"}, 200, NO_STORE


@bp.get("/readyz")
@bp.doc(operationId="getReadiness", security=NO_TOKEN)
@bp.alt_response(200, schema=_object(status={"const": "ok"}, checks=CHECKS), description="Ready.")
@bp.alt_response(
    503,
    schema=_object(message={"type": "string"}, status={"const": "unavailable"}, checks=CHECKS),
    description="A dependency does not answer; `checks` says which.",
)
def readyz():
    """Readiness: the database and the bucket answer"""
    checks = {"database": _check_database(), "storage": _check_storage()}
    failed = [name for name, result in checks.items() if result != "ok"]
    if failed:
        body = {
            "message": f"Service unavailable: {', '.join(failed)} not reachable.",
            "status": "unavailable",
            "checks": checks,
        }
        return body, 503, NO_STORE
    return {"status": "ok", "checks": checks}, 200, NO_STORE


# Anyone may ask, so answers say only ok/fail; the reason goes to the log for operators.


def _check_database() -> str:
    try:
        db.session.execute(select(1))
        return "ok"
    except SQLAlchemyError as exc:
        log.warning("readiness: database check failed: %s", type(exc).__name__)
        return "fail"
    finally:
        db.session.rollback()


def _check_storage() -> str:
    try:
        current_app.extensions["storage"].check()
        return "ok"
    except StorageError as exc:
        log.warning("readiness: storage check failed: %s", exc)
        return "fail"
