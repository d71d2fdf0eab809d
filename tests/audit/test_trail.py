"""The audit trail: one entry per change, in the change's own transaction (issue 23)."""

from __future__ import annotations

import json
import threading
from typing import Any

import pytest
from flask import Flask
from sqlalchemy import event, select
from sqlalchemy.orm import Session

from app.extensions import db
from app.models import AuditEntry
from tests.support import samples
from tests.support.api import Account, Api


def entries(app: Flask) -> list[dict[str, Any]]:
    with app.app_context():
        rows = db.session.scalars(select(AuditEntry).order_by(AuditEntry.seq)).all()
        found = [
            {
                "seq": row.seq,
                "action": row.action,
                "actor": row.actor,
                "actor_id": row.actor_id,
                "record_id": None if row.record_id is None else str(row.record_id),
                "account_id": row.account_id,
                "changes": json.loads(row.changes),
                "request_id": row.request_id,
            }
            for row in rows
        ]
        db.session.remove()
        return found


def actions(app: Flask, **where: Any) -> list[str]:
    return [
        e["action"] for e in entries(app) if all(e[key] == value for key, value in where.items())
    ]


def test_each_change_of_a_record_leaves_one_entry_with_its_values(
    api: Api, alice: Account, admin: Account, app: Flask
) -> None:
    pdf = samples.pdf_bytes()
    record = api.create(alice, "bericht.pdf", pdf, titel="Bericht", freigabe="0")
    rid = record["id"]

    assert api.patch(rid, admin, {"freigabe": True, "titel": "Bericht 2026"}).status_code == 200
    png = samples.png_bytes()
    assert api.replace(alice, rid, "bild.png", png).status_code == 200
    assert api.delete(rid, admin).status_code == 204

    trail = [e for e in entries(app) if e["record_id"] == rid]
    assert [e["action"] for e in trail] == [
        "file.create",
        "file.update",
        "file.replace",
        "file.delete",
    ]
    create, update, replace, delete = trail
    assert create["actor"] == "alice@example.org" and create["actor_id"] == alice.id
    assert create["changes"]["original_name"] == "bericht.pdf"
    assert create["changes"]["size"] == len(pdf)
    assert create["changes"]["mime_type"] == "application/pdf"
    assert len(create["changes"]["sha256"]) == 64
    assert create["changes"]["titel"] == "Bericht" and create["changes"]["freigabe"] is False

    assert update["actor"] == "admin@example.org"
    assert update["changes"] == {"titel": ["Bericht", "Bericht 2026"], "freigabe": [False, True]}

    assert replace["changes"]["old"]["original_name"] == "bericht.pdf"
    assert replace["changes"]["new"] == {
        "original_name": "bild.png",
        "size": len(png),
        "mime_type": "image/png",
        "sha256": replace["changes"]["new"]["sha256"],
        "version": 2,
    }
    assert replace["changes"]["old"]["version"] == create["changes"]["version"] == 1
    assert replace["changes"]["old"]["sha256"] == create["changes"]["sha256"]
    assert replace["changes"]["new"]["sha256"] != create["changes"]["sha256"]

    assert delete["actor"] == "admin@example.org"
    assert delete["changes"]["titel"] == "Bericht 2026"
    assert delete["changes"]["original_name"] == "bild.png"
    # Every entry made by a request names the request's id, which the access log carries.
    assert all(e["request_id"] for e in trail)


def test_a_patch_that_changes_nothing_leaves_no_entry(api: Api, alice: Account, app: Flask) -> None:
    rid = api.create(alice, titel="Gleich")["id"]
    assert api.patch(rid, alice, {"titel": "Gleich"}).status_code == 200
    assert actions(app, record_id=rid) == ["file.create"]


def test_request_id_of_the_entry_is_the_one_the_client_saw(
    api: Api, alice: Account, app: Flask
) -> None:
    rid = api.create(alice)["id"]
    response = api.client.patch(
        f"/api/files/{rid}",
        json={"titel": "Neu"},
        headers={**alice.auth, "X-Request-ID": "press-embargo-check-1"},
    )
    assert response.status_code == 200
    [update] = [e for e in entries(app) if e["action"] == "file.update"]
    assert update["request_id"] == "press-embargo-check-1"


def test_tokens_are_recorded_by_id_and_name_never_the_secret(
    api: Api, alice: Account, app: Flask
) -> None:
    response = api.client.post(
        "/api/tokens",
        json={"email": alice.email, "password": alice.password, "token_name": "laptop"},
    )
    assert response.status_code == 201
    token = response.get_json()["token"]
    token_id, _, secret = token.partition("|")
    assert (
        api.client.delete(
            "/api/tokens/current", headers={"Authorization": f"Bearer {token}"}
        ).status_code
        == 204
    )
    created = [e for e in entries(app) if e["changes"].get("name") == "laptop"]
    assert [e["action"] for e in created] == ["token.create", "token.revoke"]
    for entry in created:
        assert entry["changes"]["token_id"] == int(token_id)
        assert entry["actor"] == alice.email and entry["account_id"] == alice.id
    with app.app_context():
        dump = " ".join(db.session.scalars(select(AuditEntry.changes)).all())
        db.session.remove()
    assert secret not in dump and alice.password not in dump


def test_a_change_that_rolls_back_after_its_entry_was_written_leaves_neither(
    api: Api, alice: Account, app: Flask
) -> None:
    rid = api.create(alice, titel="Vorher")["id"]
    before = entries(app)

    def fail_after_the_entries(session: Session) -> None:
        # Runs after the trail's own before_commit listener has inserted the entries.
        if session.info.get("fail_commit"):
            raise RuntimeError("injected failure after the audit entry was written")

    def arm(session: Session, _context: Any, _instances: Any) -> None:
        session.info["fail_commit"] = True

    event.listen(Session, "before_commit", fail_after_the_entries)
    event.listen(Session, "before_flush", arm)
    try:
        response = api.patch(rid, alice, {"titel": "Nachher"})
    finally:
        event.remove(Session, "before_commit", fail_after_the_entries)
        event.remove(Session, "before_flush", arm)
    assert response.status_code == 500
    assert api.get(f"/api/files/{rid}", alice).get_json()["titel"] == "Vorher"
    assert entries(app) == before
    # And the next change is chained right after the last committed entry of its chain.
    assert api.patch(rid, alice, {"titel": "Nachher"}).status_code == 200
    assert actions(app, record_id=rid) == ["file.create", "file.update"]
    result = app.test_cli_runner().invoke(args=["audit", "verify"])
    assert result.exit_code == 0, result.output


def test_concurrent_writers_get_one_gapless_chain(api: Api, alice: Account, app: Flask) -> None:
    ids = [api.create(alice)["id"] for _ in range(4)]
    errors: list[Any] = []

    def writer(rid: str, n: int) -> None:
        client = app.test_client()
        for i in range(5):
            response = client.patch(
                f"/api/files/{rid}", json={"titel": f"t{n}-{i}"}, headers=alice.auth
            )
            if response.status_code != 200:
                errors.append(response.get_json())

    threads = [threading.Thread(target=writer, args=(rid, n)) for n, rid in enumerate(ids)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert errors == []
    trail = entries(app)
    assert len({e["seq"] for e in trail}) == len(trail)
    assert sum(1 for e in trail if e["action"] == "file.update") == 20
    result = app.test_cli_runner().invoke(args=["audit", "verify"])
    assert result.exit_code == 0, result.output


@pytest.mark.parametrize(
    ("args", "action", "changes"),
    [
        (
            ["users", "set-password", "ops@example.org", "--password", "neu-123456"],
            "account.update",
            {"password": "changed"},
        ),
        (
            ["users", "deactivate", "ops@example.org"],
            "account.update",
            {"is_active": [True, False]},
        ),
    ],
)
def test_operator_commands_are_recorded_as_the_command(
    app: Flask, args: list[str], action: str, changes: dict[str, Any]
) -> None:
    runner = app.test_cli_runner()
    result = runner.invoke(
        args=[
            "create-user",
            "--email",
            "ops@example.org",
            "--name",
            "Ops",
            "--password",
            "pw-12345",
        ]
    )
    assert result.exit_code == 0, result.output
    result = runner.invoke(args=args)
    assert result.exit_code == 0, result.output
    trail = entries(app)
    assert trail[0]["action"] == "account.create"
    assert trail[0]["actor"] == "cli:create-user"
    assert trail[0]["changes"] == {
        "email": "ops@example.org",
        "name": "Ops",
        "is_admin": False,
        "is_active": True,
    }
    assert trail[-1]["action"] == action
    assert trail[-1]["actor"] == "cli:" + " ".join(args[:2])
    assert trail[-1]["changes"] == changes
    assert "neu-123456" not in json.dumps(trail) and "pw-12345" not in json.dumps(trail)


def test_provision_admin_and_activate_are_recorded(app: Flask) -> None:
    runner = app.test_cli_runner()
    args = ["provision-admin", "--email", "boss@example.org", "--password", "pw-a1234"]
    assert runner.invoke(args=args).exit_code == 0
    assert runner.invoke(args=["users", "deactivate", "boss@example.org"]).exit_code == 0
    assert runner.invoke(args=["users", "activate", "boss@example.org"]).exit_code == 0
    trail = entries(app)
    assert [(e["action"], e["actor"]) for e in trail] == [
        ("account.create", "cli:provision-admin"),
        ("account.update", "cli:users deactivate"),
        ("account.update", "cli:users activate"),
    ]
    assert trail[0]["changes"]["is_admin"] is True
    assert trail[2]["changes"] == {"is_active": [False, True]}


def test_records_made_by_tus_and_by_import_are_created_entries(
    api: Api, alice: Account, app: Flask, tmp_path: Any
) -> None:
    from tests.tus.test_tus_protocol import TEXT, create, patch

    created = create(api, alice, titel="Per tus")
    assert created.status_code == 201
    finished = patch(api, alice, created.headers["Location"], TEXT)
    assert finished.status_code == 204
    record_id = finished.headers["Upload-Record-Id"]
    [entry] = [e for e in entries(app) if e["record_id"] == record_id]
    assert entry["action"] == "file.create" and entry["actor"] == alice.email
    assert entry["changes"]["titel"] == "Per tus" and entry["changes"]["size"] == len(TEXT)

    folder = tmp_path / "sammlung"
    folder.mkdir()
    (folder / "bericht.pdf").write_bytes(samples.pdf_bytes())
    result = app.test_cli_runner().invoke(
        args=["import", str(folder), "--owner", alice.email, "--path", "archiv"]
    )
    assert result.exit_code == 0, result.output
    [imported] = [e for e in entries(app) if e["changes"].get("path") == "archiv"]
    assert imported["action"] == "file.create" and imported["actor"] == "cli:import"
    assert imported["changes"]["original_name"] == "bericht.pdf"
