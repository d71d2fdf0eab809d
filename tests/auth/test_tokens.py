from __future__ import annotations

import hashlib
from datetime import timedelta

import pytest
from sqlalchemy import select

from app import create_app
from app.extensions import db
from app.models import ApiToken, utcnow
from tests.support.api import Account, Api

CREDENTIALS_ERROR = {
    "message": "The provided credentials are incorrect.",
    "errors": {"email": ["The provided credentials are incorrect."]},
}


def login(api: Api, **body: object):
    return api.client.post("/api/tokens", json=body)


def test_issue_token_returns_sanctum_shape_and_it_authenticates(api: Api, alice: Account):
    response = login(api, email=alice.email, password=alice.password, token_name="laptop")

    assert response.status_code == 201
    body = response.get_json()
    assert list(body) == ["token"]
    token_id, sep, secret = body["token"].partition("|")
    assert sep == "|" and token_id.isdigit()
    assert len(secret) >= 43  # 32 random bytes, URL-safe base64
    listed = api.client.get("/api/files", headers={"Authorization": f"Bearer {body['token']}"})
    assert listed.status_code == 200


def test_only_a_sha256_of_the_secret_is_stored(api: Api, alice: Account):
    token = login(api, email=alice.email, password=alice.password, token_name="x").get_json()[
        "token"
    ]
    token_id, _, secret = token.partition("|")
    with api.app.app_context():
        row = db.session.get(ApiToken, int(token_id))
        assert row.name == "x"
        assert row.token_hash == hashlib.sha256(secret.encode()).hexdigest()
        assert secret not in row.token_hash


def test_email_is_case_insensitive(api: Api, alice: Account):
    response = login(api, email="  ALICE@Example.ORG ", password=alice.password, token_name="x")
    assert response.status_code == 201


def test_form_encoded_login_is_accepted(api: Api, alice: Account):
    response = api.client.post(
        "/api/tokens",
        data={"email": alice.email, "password": alice.password, "token_name": "form"},
    )
    assert response.status_code == 201


@pytest.mark.parametrize("email", ["alice@example.org", "nobody@example.org"])
def test_wrong_credentials_answer_the_same(api: Api, alice: Account, email: str):
    response = login(api, email=email, password="wrong", token_name="x")
    assert response.status_code == 422
    assert response.get_json() == CREDENTIALS_ERROR


def test_missing_fields_are_reported_per_field(api: Api):
    response = login(api)
    assert response.status_code == 422
    body = response.get_json()
    assert body["errors"] == {
        "email": ["The email field is required."],
        "password": ["The password field is required."],
        "token_name": ["The token_name field is required."],
    }
    assert body["message"] == "The email field is required. (and 2 more errors)"


def test_non_string_fields_are_rejected(api: Api):
    response = login(api, email=["a"], password=1, token_name="x")
    assert response.status_code == 422
    assert set(response.get_json()["errors"]) == {"email", "password"}


def test_invalid_json_is_422(api: Api):
    response = api.client.post(
        "/api/tokens", data="{nope", headers={"Content-Type": "application/json"}
    )
    assert response.status_code == 422
    assert response.get_json()["errors"] == {"body": ["The request body must be valid JSON."]}


def test_revoke_current_token(api: Api, alice: Account):
    response = api.client.delete("/api/tokens/current", headers=alice.auth)
    assert response.status_code == 204
    assert response.data == b""
    assert "Content-Type" not in response.headers
    again = api.client.get("/api/files", headers=alice.auth)
    assert again.status_code == 401


def test_revoking_one_token_keeps_the_others(api: Api, alice: Account):
    second = login(api, email=alice.email, password=alice.password, token_name="2").get_json()
    api.client.delete("/api/tokens/current", headers=alice.auth)
    response = api.client.get("/api/files", headers={"Authorization": f"Bearer {second['token']}"})
    assert response.status_code == 200


@pytest.mark.parametrize(
    "header",
    [
        None,
        "Bearer",
        "Bearer ",
        "Basic YWxpY2U6cHc=",
        "Bearer nonsense",
        "Bearer 1|",
        "Bearer 999|abcdef",
        "Bearer x|abcdef",
    ],
)
def test_missing_or_invalid_token_is_401(api: Api, alice: Account, header: str | None):
    headers = {"Authorization": header} if header is not None else {}
    for method, path in [
        ("get", "/api/files"),
        ("post", "/api/files"),
        ("delete", "/api/tokens/current"),
        ("get", "/api/files/00000000-0000-4000-8000-000000000000/download"),
    ]:
        response = getattr(api.client, method)(path, headers=headers)
        assert response.status_code == 401, (method, path)
        assert response.get_json() == {"message": "Unauthenticated."}
        assert response.headers["WWW-Authenticate"] == "Bearer"


def test_wrong_secret_for_a_real_token_id_is_401(api: Api, alice: Account):
    token_id = alice.token.split("|")[0]
    response = api.client.get("/api/files", headers={"Authorization": f"Bearer {token_id}|x"})
    assert response.status_code == 401


def test_expired_token_is_401(api: Api, alice: Account, stack_config: dict):
    app = create_app({**stack_config, "TOKEN_TTL_MINUTES": 5})
    client = app.test_client()
    token = client.post(
        "/api/tokens",
        json={"email": alice.email, "password": alice.password, "token_name": "short"},
    ).get_json()["token"]
    headers = {"Authorization": f"Bearer {token}"}
    assert client.get("/api/files", headers=headers).status_code == 200
    with app.app_context():
        row = db.session.get(ApiToken, int(token.split("|")[0]))
        assert row.expires_at is not None
        row.expires_at = utcnow() - timedelta(seconds=1)
        db.session.commit()
    assert client.get("/api/files", headers=headers).status_code == 401
    with app.app_context():
        db.engine.dispose()


def test_token_checks_do_not_write_on_every_request(api: Api, alice: Account):
    for _ in range(3):
        assert api.get("/api/files", alice).status_code == 200
    with api.app.app_context():
        first = db.session.scalars(select(ApiToken.last_used_at)).one()
    assert api.get("/api/files", alice).status_code == 200
    with api.app.app_context():
        assert db.session.scalars(select(ApiToken.last_used_at)).one() == first


def test_token_creation_is_rate_limited(api: Api, alice: Account, stack_config: dict):
    app = create_app({**stack_config, "RATELIMIT_ENABLED": True, "RATELIMIT_TOKENS": "3/minute"})
    client = app.test_client()
    body = {"email": alice.email, "password": "wrong", "token_name": "x"}
    statuses = [client.post("/api/tokens", json=body).status_code for _ in range(3)]
    assert statuses == [422, 422, 422]
    limited = client.post("/api/tokens", json=body)
    assert limited.status_code == 429
    assert int(limited.headers["Retry-After"]) > 0
    assert "message" in limited.get_json()
    # Another email from the same address has its own budget.
    other = client.post("/api/tokens", json={**body, "email": "someone@example.org"})
    assert other.status_code == 422
    with app.app_context():
        db.engine.dispose()


def test_no_http_route_grants_the_admin_role(api: Api, alice: Account):
    for path in ("/api/users", "/api/admin", f"/api/users/{alice.id}"):
        for method in ("post", "patch", "put"):
            response = getattr(api.client, method)(
                path, json={"is_admin": True}, headers=alice.auth
            )
            assert response.status_code in (404, 405)
    assert api.user(alice.id).is_admin is False


def test_a_password_with_control_characters_still_signs_in(app, client):
    # Text fields refuse what XML cannot carry; a password is only hashed, so an operator's
    # `create-user` password with such characters must keep working.
    from app.auth.services import create_user

    password = "tab\tbell\x07escape\x1b"
    with app.app_context():
        create_user("ctrl@example.org", "Ctrl", password)
    response = client.post(
        "/api/tokens",
        json={"email": "ctrl@example.org", "password": password, "token_name": "t"},
    )
    assert response.status_code == 201
    wrong = client.post(
        "/api/tokens",
        json={"email": "ctrl@example.org", "password": "tab\tbell", "token_name": "t"},
    )
    assert wrong.status_code == 422
