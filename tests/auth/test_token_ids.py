"""What a bearer token's id part may be, whatever its size."""

from __future__ import annotations

import pytest

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
