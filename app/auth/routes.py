from __future__ import annotations

from flask import current_app, request

from app.auth.guard import current_user
from app.auth.schemas import TokenRequestSchema, TokenSchema
from app.auth.services import authenticate, issue_token, revoke_token
from app.docs.openapi import (
    BODY_ERRORS,
    NO_TOKEN,
    RATE_LIMIT_HEADERS,
    SERVER,
    Blueprint,
    json_body_doc,
)
from app.extensions import limiter
from app.http import json_body, load

bp = Blueprint("auth", __name__, tag="Tokens", errors=SERVER)


token_request_schema = TokenRequestSchema()


def _login_rate_key() -> str:
    """Per client address and email, so one address cannot lock out everybody."""
    body = json_body()
    email = body.get("email") if isinstance(body, dict) else None
    email = email.strip().lower() if isinstance(email, str) else ""
    return f"login:{request.remote_addr}:{email}"


@bp.post("/api/tokens")
@limiter.limit(lambda: current_app.config["RATELIMIT_TOKENS"], key_func=_login_rate_key)
@bp.doc(
    operationId="createToken",
    security=NO_TOKEN,
    requestBody=json_body_doc(TokenRequestSchema, form=True),
)
@bp.alt_response(201, schema=TokenSchema, description="The new token.", headers=RATE_LIMIT_HEADERS)
@bp.errors(*BODY_ERRORS, "TooManyRequests")
def create_token():
    """Create a personal access token

    Wrong email or password answer the same 422 (`errors.email`). Rate limited per client address
    and email.
    """
    data = load(token_request_schema, json_body())
    user = authenticate(data["email"], data["password"])
    return {"token": issue_token(user, data["token_name"].strip())}, 201


@bp.delete("/api/tokens/current")
@bp.doc(operationId="revokeCurrentToken")
@bp.alt_response(204, description="Revoked; no body.")
@bp.errors("Unauthenticated")
def delete_current_token():
    """Revoke the token of this request

    The revoked token answers 401 from then on.
    """
    revoke_token(current_user().token_id)
    return "", 204
