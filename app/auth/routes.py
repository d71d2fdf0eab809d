from __future__ import annotations

from flask import Blueprint, current_app, request

from app.auth.guard import current_user
from app.auth.schemas import TokenRequestSchema
from app.auth.services import authenticate, issue_token, revoke_token
from app.docs.openapi import NO_TOKEN, RATE_LIMIT_HEADERS, errors, json_content, openapi, ref
from app.extensions import limiter
from app.http import json_body, load

bp = Blueprint("auth", __name__)


token_request_schema = TokenRequestSchema()


def _login_rate_key() -> str:
    """Per client address and email, so one address cannot lock out everybody."""
    body = json_body()
    email = body.get("email") if isinstance(body, dict) else None
    email = email.strip().lower() if isinstance(email, str) else ""
    return f"login:{request.remote_addr}:{email}"


@bp.post("/api/tokens")
@limiter.limit(lambda: current_app.config["RATELIMIT_TOKENS"], key_func=_login_rate_key)
@openapi(
    tags=["Tokens"],
    operationId="createToken",
    summary="Create a personal access token",
    description=(
        "Wrong email or password answer the same 422 (`errors.email`). Rate limited "
        "per client address and email."
    ),
    security=NO_TOKEN,
    requestBody={
        "required": True,
        "content": {
            "application/json": {"schema": ref("schemas", "TokenRequest")},
            "application/x-www-form-urlencoded": {"schema": ref("schemas", "TokenRequest")},
        },
    },
    responses={
        "201": {
            "description": "The new token.",
            "headers": RATE_LIMIT_HEADERS,
            "content": json_content(ref("schemas", "Token")),
        },
        **errors(
            "BadRequest",
            "PayloadTooLarge",
            "ValidationFailed",
            "TooManyRequests",
            "ServerError",
            "ServiceUnavailable",
        ),
    },
)
def create_token():
    data = load(token_request_schema, json_body())
    user = authenticate(data["email"], data["password"])
    return {"token": issue_token(user, data["token_name"].strip())}, 201


@bp.delete("/api/tokens/current")
@openapi(
    tags=["Tokens"],
    operationId="revokeCurrentToken",
    summary="Revoke the token of this request",
    description="The revoked token answers 401 from then on.",
    responses={
        "204": {"description": "Revoked; no body."},
        **errors("Unauthenticated", "ServerError", "ServiceUnavailable"),
    },
)
def delete_current_token():
    revoke_token(current_user().token_id)
    return "", 204
