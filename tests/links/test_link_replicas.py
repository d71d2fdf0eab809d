"""Two replicas on one database: a link revoked or expired on one is dead on the other at its
very next request (links are read from the database on every use, never cached)."""

from __future__ import annotations

import uuid

import pytest

from tests.links.test_links import TOMORROW, secret_of
from tests.support.replicas import Replicas

pytestmark = pytest.mark.postgres


def test_revocation_and_expiry_hold_on_the_other_replica_at_once(replicas: Replicas) -> None:
    api = replicas.api
    alice = api.account("alice@example.org")
    record = api.create(alice, "a.txt", b"hello\n", freigabe=0)
    b = replicas.b.test_client()
    links = []
    for _ in range(2):
        response = api.client.post(
            f"/api/files/{record['id']}/links", json={"expires_at": TOMORROW}, headers=alice.auth
        )
        assert response.status_code == 201
        links.append(response.get_json())
    revoked, expiring = links
    for link in links:
        page = b.get(f"/api/shared/{secret_of(link)}/files/{record['id']}/download")
        assert (page.status_code, page.data) == (200, b"hello\n")

    path = f"/api/files/{record['id']}/links/{revoked['id']}"
    assert api.client.delete(path, headers=alice.auth).status_code == 204
    assert b.get(f"/api/shared/{secret_of(revoked)}").status_code == 404

    replicas.sql(
        (
            "UPDATE share_links SET expires_at = now() - interval '1 second' WHERE id = %s",
            (uuid.UUID(expiring["id"]),),
        )
    )
    assert b.get(f"/api/shared/{secret_of(expiring)}").status_code == 410
