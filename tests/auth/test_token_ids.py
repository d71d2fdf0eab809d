"""What a bearer token's id part may be, whatever its size."""

from __future__ import annotations

import pytest
from sqlalchemy import update

from app.extensions import db
from app.models import ApiToken
from tests.support.api import Account, Api

INT32_MAX = 2**31 - 1


@pytest.mark.parametrize(
    "token_id",
    [
        "9" * 9,  # fits every id column, names no token
        str(INT32_MAX + 1),  # beyond PostgreSQL's integer column
        "9" * 18,  # beyond it too, still a 64-bit integer
        "9" * 19,  # beyond a 64-bit integer
        "9" * 40,
    ],
)
def test_a_token_id_beyond_any_token_is_401(api: Api, alice: Account, token_id: str):
    secret = alice.token.partition("|")[2]
    headers = {"Authorization": f"Bearer {token_id}|{secret}"}
    response = api.client.get("/api/files", headers=headers)
    assert response.status_code == 401
    assert response.get_json() == {"message": "Unauthenticated."}


def test_the_largest_token_id_is_a_token_like_any_other(api: Api, alice: Account):
    """The bound is the column's: a token whose id is exactly INT32_MAX is accepted."""
    issued, _, secret = alice.token.partition("|")
    with api.app.app_context():
        db.session.execute(update(ApiToken).where(ApiToken.id == int(issued)).values(id=INT32_MAX))
        db.session.commit()
    headers = {"Authorization": f"Bearer {INT32_MAX}|{secret}"}
    assert api.client.get("/api/files", headers=headers).status_code == 200
