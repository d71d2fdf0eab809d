from __future__ import annotations

from flask import current_app, request

from app.auth import bp
from app.auth.guard import current_user
from app.auth.services import authenticate, issue_token, revoke_token
from app.extensions import limiter
from app.http import json_body, load
from app.schemas import TokenRequestSchema

token_request_schema = TokenRequestSchema()


def _login_rate_key() -> str:
    """Per client address and email, so one address cannot lock out everybody."""
    body = json_body()
    email = body.get("email") if isinstance(body, dict) else None
    email = email.strip().lower() if isinstance(email, str) else ""
    return f"login:{request.remote_addr}:{email}"


@bp.post("/api/tokens")
@limiter.limit(lambda: current_app.config["RATELIMIT_TOKENS"], key_func=_login_rate_key)
def create_token():
    data = load(token_request_schema, json_body())
    user = authenticate(data["email"], data["password"])
    return {"token": issue_token(user, data["token_name"].strip())}, 201


@bp.delete("/api/tokens/current")
def delete_current_token():
    revoke_token(current_user().token_id)
    return "", 204
