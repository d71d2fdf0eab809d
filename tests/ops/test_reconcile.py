"""`flask storage reconcile` and `flask storage verify` on both stacks."""

from __future__ import annotations

import io
import uuid
from datetime import UTC, datetime

from app.extensions import db
from app.models import FileVersion, PendingObjectDeletion
from app.ops.reconcile import reconcile_command, verify_command
from tests.support import samples
from tests.support.api import Api


def test_orphans_are_listed_and_removed_after_the_grace_period(app, client, runner):
    api = Api(app, client)
    alice = api.account("alice@example.org")
    kept = api.create(alice)
    storage = app.extensions["storage"]
    orphan = f"files/{uuid.uuid4()}/{uuid.uuid4()}"
    storage.put(orphan, io.BytesIO(b"left behind by a killed process"))

    young = runner.invoke(reconcile_command, [])
    assert young.exit_code == 0, young.output
    assert "orphaned objects: 0" in young.output and "left alone: 1" in young.output

    listed = runner.invoke(reconcile_command, ["--grace-minutes", "0"])
    assert listed.exit_code == 0, listed.output
    assert f"orphaned object {orphan}" in listed.output
    assert orphan in api.objects()

    fixed = runner.invoke(reconcile_command, ["--fix", "--grace-minutes", "0"])
    assert fixed.exit_code == 0, fixed.output
    assert f"removed object {orphan}" in fixed.output
    assert api.objects() == {api.row(kept["id"]).stored_path}


def test_owed_deletions_are_finished(app, client, runner):
    api = Api(app, client)
    storage = app.extensions["storage"]
    owed = f"files/{uuid.uuid4()}/{uuid.uuid4()}"
    storage.put(owed, io.BytesIO(b"owed"))
    with app.app_context():
        db.session.add(PendingObjectDeletion(key=owed, created_at=datetime.now(UTC)))
        db.session.commit()
    listed = runner.invoke(reconcile_command, ["--grace-minutes", "0"])
    assert "orphaned objects: 0" in listed.output  # owed, so not an orphan
    fixed = runner.invoke(reconcile_command, ["--fix"])
    assert fixed.exit_code == 0, fixed.output
    assert "owed deletions done: 1, still failing: 0" in fixed.output
    assert api.objects() == set()
    with app.app_context():
        assert db.session.scalars(db.select(PendingObjectDeletion)).all() == []


def test_records_without_objects_are_reported(app, client, runner):
    api = Api(app, client)
    alice = api.account("alice@example.org")
    record = api.create(alice)
    app.extensions["storage"].delete(api.row(record["id"]).stored_path)
    result = runner.invoke(reconcile_command, ["--fix"])
    assert result.exit_code == 1
    assert f"record {record['id']} has no object" in result.output
    assert "records without objects: 1" in result.output


def test_verify_finds_changed_and_missing_content(app, client, runner):
    api = Api(app, client)
    alice = api.account("alice@example.org")
    good = api.create(alice, "good.pdf", samples.pdf_bytes())
    tampered = api.create(alice, "tampered.txt", b"original text\n")
    same_size = api.create(alice, "rot.txt", b"bits intact\n")
    gone = api.create(alice, "gone.txt", b"soon gone\n")
    storage = app.extensions["storage"]
    storage.put(api.row(tampered["id"]).stored_path, io.BytesIO(b"forged text, longer\n"))
    storage.put(api.row(same_size["id"]).stored_path, io.BytesIO(b"bits intacT\n"))
    storage.delete(api.row(gone["id"]).stored_path)

    result = runner.invoke(verify_command, [])
    assert result.exit_code == 1
    assert f"{tampered['id']}: size 20 bytes, recorded 14" in result.output
    assert f"{same_size['id']}: content does not match its SHA-256" in result.output
    assert f"{gone['id']}: object" in result.output and "is missing" in result.output
    assert good["id"] not in result.output
    assert "checked 4 records" in result.output and "3 problem(s)" in result.output

    only_good = runner.invoke(verify_command, ["--record", good["id"]])
    assert only_good.exit_code == 0, only_good.output
    assert "checked 1 records" in only_good.output and "0 problem(s)" in only_good.output


def test_verify_of_an_unknown_record_exits_1_naming_it(app, client, runner):
    api = Api(app, client)
    alice = api.account("alice@example.org")
    good = api.create(alice, "good.txt", b"kept\n")
    unknown = "0f0f0f0f-0000-4000-8000-000000000001"

    result = runner.invoke(verify_command, ["--record", unknown])
    assert result.exit_code == 1, result.output
    assert f"{unknown}: no record has this id" in result.output
    assert "1 problem(s)" in result.output

    both = runner.invoke(verify_command, ["--record", good["id"], "--record", unknown])
    assert both.exit_code == 1
    assert "checked 1 records" in both.output and f"{unknown}: no record" in both.output


def test_kept_versions_are_no_orphans_and_are_verified(app, client, runner):
    """Issue 39: a kept version's object is named by its row; reconcile leaves it alone and
    reports it when it is gone, verify re-reads every byte of it."""
    app.config["KEEP_RELEASED_VERSIONS"] = "on"
    api = Api(app, client)
    alice = api.account("alice@example.org")
    record = api.create(alice, "v1.txt", b"first version\n")
    assert api.replace(alice, record["id"], "v2.txt", b"second version\n").status_code == 200
    assert api.replace(alice, record["id"], "v3.txt", b"third version\n").status_code == 200
    with app.app_context():
        kept = dict(
            db.session.execute(
                db.select(FileVersion.number, FileVersion.stored_path).order_by(FileVersion.number)
            ).all()
        )
    assert list(kept) == [1, 2] and None not in kept.values()
    assert len(api.objects()) == 3

    fixed = runner.invoke(reconcile_command, ["--fix", "--grace-minutes", "0"])
    assert fixed.exit_code == 0, fixed.output
    assert "orphaned objects: 0" in fixed.output
    assert len(api.objects()) == 3

    clean = runner.invoke(verify_command, ["--record", record["id"]])
    assert clean.exit_code == 0, clean.output
    assert "checked 1 records and 2 kept versions" in clean.output
    assert "(43 bytes)" in clean.output  # all three contents

    storage = app.extensions["storage"]
    storage.put(kept[1], io.BytesIO(b"first versioN\n"))
    storage.delete(kept[2])
    verified = runner.invoke(verify_command, [])
    assert verified.exit_code == 1
    assert f"{record['id']} version 1: content does not match its SHA-256" in verified.output
    assert f"{record['id']} version 2: object {kept[2]} is missing" in verified.output
    reconciled = runner.invoke(reconcile_command, [])
    assert reconciled.exit_code == 1
    assert f"record {record['id']} version 2 has no object ({kept[2]})" in reconciled.output
