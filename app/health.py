"""Liveness and readiness probes for load balancers and orchestrators (no token needed)."""

from __future__ import annotations

import logging

from flask import current_app
from sqlalchemy import select
from sqlalchemy.exc import SQLAlchemyError

from app.docs.openapi import NO_TOKEN, Blueprint, json_content
from app.extensions import db
from app.storage import StorageError

bp = Blueprint("health", __name__, tag="Operations")
log = logging.getLogger(__name__)

NO_STORE = {"Cache-Control": "no-store"}
CHECKS = {
    "type": "object",
    "properties": {
        "database": {"type": "string", "enum": ["ok", "fail"]},
        "storage": {"type": "string", "enum": ["ok", "fail"]},
    },
    "required": ["database", "storage"],
}


@bp.get("/healthz")
@bp.doc(
    operationId="getHealth",
    summary="Liveness: the process answers (dependencies are not checked)",
    security=NO_TOKEN,
    responses={
        "200": {
            "description": "Alive.",
            "content": json_content(
                {
                    "type": "object",
                    "properties": {"status": {"const": "ok"}},
                    "required": ["status"],
                }
            ),
        }
    },
)
def healthz():
    """The process answers; says nothing about its dependencies."""
    return {"status": "ok"}, 200, NO_STORE


@bp.get("/readyz")
@bp.doc(
    operationId="getReadiness",
    summary="Readiness: the database and the bucket answer",
    security=NO_TOKEN,
    responses={
        "200": {
            "description": "Ready.",
            "content": json_content(
                {
                    "type": "object",
                    "properties": {"status": {"const": "ok"}, "checks": CHECKS},
                    "required": ["status", "checks"],
                }
            ),
        },
        "503": {
            "description": "A dependency does not answer; `checks` says which.",
            "content": json_content(
                {
                    "type": "object",
                    "properties": {
                        "message": {"type": "string"},
                        "status": {"const": "unavailable"},
                        "checks": CHECKS,
                    },
                    "required": ["message", "status", "checks"],
                }
            ),
        },
    },
)
def readyz():
    """Ready when the database and the bucket both answer; 503 names what does not."""
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
