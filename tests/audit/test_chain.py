"""`flask audit verify|prune|export`: edits of the past by SQL are caught (issue 23 items 3-4)."""

from __future__ import annotations

import json
from datetime import datetime, timedelta

import pytest
from flask import Flask
from sqlalchemy import select, text

from app.audit import services
from app.audit.services import PRUNE
from app.audit.trail import entry_hash, note
from app.extensions import db
from app.models import AuditChainHead, AuditEntry, utcnow
from app.schemas.field_types import format_timestamp
from tests.support.api import Account, Api


@pytest.fixture
def trail(api: Api, alice: Account, admin: Account) -> list[str]:
    """Ten entries or so: accounts, tokens, a record created and changed four times."""
    rid = api.create(alice, titel="Entwurf", freigabe="0")["id"]
    for titel in ("Eins", "Zwei", "Drei"):
        assert api.patch(rid, alice, {"titel": titel}).status_code == 200
    assert api.patch(rid, admin, {"freigabe": True}).status_code == 200
    return [rid]


def verify(app: Flask, *args: str) -> tuple[int, str]:
    result = app.test_cli_runner().invoke(args=["audit", "verify", *args])
    return result.exit_code, result.output


def sql(app: Flask, statement: str, **params: object) -> None:
    with app.app_context():
        db.session.execute(text(statement), params)
        db.session.commit()
        db.session.remove()


def last_seq(app: Flask) -> int:
    with app.app_context():
        value = db.session.scalar(select(AuditEntry.seq).order_by(AuditEntry.seq.desc()))
        db.session.remove()
        return int(value or 0)


def insert_forged(app: Flask, after: int, actor: str, action: str) -> None:
    """An entry written by SQL after entry `after` of chain 0, hashed as the service would."""
    with app.app_context():
        previous = db.session.get(AuditEntry, after)
        row = {
            "seq": after + 1,
            "chain": 0,
            "chain_seq": after + 1,
            "at": previous.at,
            "actor_id": None,
            "actor": actor,
            "action": action,
            "record_id": None,
            "account_id": 1,
            "changes": "{}",
            "request_id": None,
            "prev_hash": previous.hash,
        }
        row["hash"] = entry_hash(row)
        db.session.execute(AuditEntry.__table__.insert().values(**row))
        db.session.commit()
        db.session.remove()


def test_an_intact_trail_verifies_and_prints_its_anchor(app: Flask, trail: list[str]) -> None:
    code, output = verify(app)
    assert code == 0, output
    assert f"audit trail intact: {last_seq(app)} entries" in output
    anchor = output.strip().rsplit("anchor ", 1)[1]
    assert "@" in anchor
    assert verify(app, "--anchor", anchor)[0] == 0
    # An anchor printed before issue 36 (no time) is still accepted while its entries stand.
    assert verify(app, "--anchor", anchor.partition("@")[0])[0] == 0


@pytest.mark.parametrize(
    "anchor",
    [
        "",
        "abc",
        "not-an-anchor",
        "f" * 64,
        "f" * 64 + ":",
        "f" * 64 + ":1,x",
        "g" * 64 + ":3",
        "f" * 64 + ":3@",
        "f" * 64 + ":3@2026-13-01T00:00:00Z",
        "f" * 64 + ":3@2026-11-28",
    ],
)
def test_a_malformed_anchor_is_a_usage_error(app: Flask, trail: list[str], anchor: str) -> None:
    code, output = verify(app, "--anchor", anchor)
    assert code == 2, output
    assert output.splitlines()[-1] == (
        "Error: Invalid value for '--anchor': not an anchor that `flask audit verify` printed "
        "(64 hex digits, ':', the chains' lengths separated by commas, then '@' and the time "
        "it was taken)"
    )
    assert "BROKEN" not in output


def test_an_altered_entry_is_caught(app: Flask, trail: list[str]) -> None:
    sql(
        app,
        "UPDATE audit_entries SET changes = :changes WHERE seq = 5",
        changes=json.dumps({"titel": ["Eins", "Gefälscht"]}),
    )
    code, output = verify(app)
    assert code == 1
    assert "BROKEN at entry 5" in output and "altered" in output


def test_an_altered_entry_with_a_recomputed_hash_is_caught_at_the_next(
    app: Flask, trail: list[str]
) -> None:
    with app.app_context():
        entry = db.session.get(AuditEntry, 5)
        entry.actor = "someone-else@example.org"
        row = {
            c: getattr(entry, c)
            for c in ("seq", "chain", "chain_seq", "at", "actor_id", "actor", "action")
        }
        row |= {
            "record_id": entry.record_id,
            "account_id": entry.account_id,
            "changes": entry.changes,
            "request_id": entry.request_id,
            "prev_hash": entry.prev_hash,
        }
        forged = entry_hash(row)
        db.session.remove()
    sql(
        app,
        "UPDATE audit_entries SET actor = 'someone-else@example.org', hash = :h WHERE seq = 5",
        h=forged,
    )
    code, output = verify(app)
    assert code == 1
    assert "BROKEN at entry 6" in output and "inserted or replaced" in output


def test_a_removed_entry_is_caught(app: Flask, trail: list[str]) -> None:
    sql(app, "DELETE FROM audit_entries WHERE seq = 4")
    code, output = verify(app)
    assert code == 1
    assert "BROKEN at entry 5" in output and "1 entries before entry 5 were removed" in output


def test_entries_removed_from_the_end_are_caught(app: Flask, trail: list[str]) -> None:
    seq = last_seq(app)
    sql(app, "DELETE FROM audit_entries WHERE seq >= :s", s=seq - 1)
    code, output = verify(app)
    assert code == 1 and "chain 0: 2 entries were removed from its end" in output


def test_entries_removed_from_the_start_are_caught(app: Flask, trail: list[str]) -> None:
    sql(app, "DELETE FROM audit_entries WHERE seq <= 2")
    code, output = verify(app)
    assert code == 1
    assert output == (
        "audit trail BROKEN at entry 3: chain 0: entries before entry 3 were removed "
        "(no prune recorded)\n"
    )


def test_an_inserted_entry_is_caught(app: Flask, trail: list[str]) -> None:
    # Make room after entry 4 by renumbering the later ones, then insert a forged entry that
    # chains correctly to entry 4: the renumbered entries no longer match their hashes.
    seq = last_seq(app)
    for n in range(seq, 4, -1):
        sql(
            app,
            "UPDATE audit_entries SET seq = :new, chain_seq = :new WHERE seq = :old",
            new=n + 1,
            old=n,
        )
    insert_forged(app, after=4, actor="cli:users deactivate", action="account.update")
    code, output = verify(app)
    assert code == 1
    assert "BROKEN at entry 6" in output


def test_an_entry_appended_past_the_head_is_caught(app: Flask, trail: list[str]) -> None:
    seq = last_seq(app)
    insert_forged(app, after=seq, actor="cli:create-user", action="account.create")
    code, output = verify(app)
    assert code == 1 and "inserted past the chain's head" in output


def test_a_rewritten_chain_differs_from_the_anchor_kept_outside(
    app: Flask, trail: list[str]
) -> None:
    _, output = verify(app)
    anchor = output.strip().rsplit("anchor ", 1)[1]
    # Someone with the database and this code rewrites the past consistently: every hash
    # from the altered entry on recomputed, and the head moved along. Only the anchor kept
    # outside the database tells.
    with app.app_context():
        chain = db.session.scalars(
            select(AuditEntry).where(AuditEntry.chain == 0).order_by(AuditEntry.chain_seq)
        ).all()
        prev = chain[4].prev_hash
        for entry in chain[4:]:
            if entry is chain[4]:
                entry.actor = "someone-else@example.org"
            entry.prev_hash = prev
            entry.hash = prev = entry_hash(
                {
                    **{c.key: getattr(entry, c.key) for c in AuditEntry.__table__.columns},
                    "prev_hash": prev,
                }
            )
        db.session.execute(
            text("UPDATE audit_chain_heads SET last_hash = :h WHERE id = 0"), {"h": prev}
        )
        db.session.commit()
        db.session.remove()
    assert verify(app)[0] == 0
    code, output = verify(app, "--anchor", anchor)
    assert code == 1
    assert output == (
        "audit trail BROKEN: the chains did not grow from the anchor: they were rewritten\n"
    )


def written_at(monkeypatch: pytest.MonkeyPatch, when: datetime) -> None:
    """From now on the trail's entries (and verify's clock) read `when`: a trail written in
    the past, without waiting a year."""
    monkeypatch.setattr("app.audit.trail.utcnow", lambda: when)
    monkeypatch.setattr("app.audit.services.utcnow", lambda: when)


def anchor_now(app: Flask) -> str:
    code, output = verify(app)
    assert code == 0, output
    return output.strip().splitlines()[0].rsplit("anchor ", 1)[1]


def chain_zero(app: Flask, chain: int = 0) -> list[AuditEntry]:
    with app.app_context():
        entries = db.session.scalars(
            select(AuditEntry).where(AuditEntry.chain == chain).order_by(AuditEntry.chain_seq)
        ).all()
        db.session.expunge_all()
        db.session.remove()
    return list(entries)


@pytest.mark.parametrize("form", ["as before issue 36", "with first_kept"])
def test_a_forged_prune_of_the_past_before_the_anchor_is_caught(
    app: Flask, trail: list[str], api: Api, alice: Account, form: str
) -> None:
    # Issue 36, finding 2: the administrator's "embargo lifted early" change and everything
    # before it deleted by SQL, then the `audit.prune` entry anyone can compute appended as
    # the service appends one; the anchor taken after the change still names a kept entry.
    assert api.patch(trail[0], alice, {"titel": "Später"}).status_code == 200
    anchor = anchor_now(app)
    entries = chain_zero(app)
    lifted = next(e for e in entries if e.action == "file.update" and "freigabe" in e.changes)
    after = entries[lifted.chain_seq]  # the first entry kept, the anchor's
    changes: dict[str, object] = {
        "chains": {"0": [lifted.chain_seq, lifted.hash]},
        "removed": lifted.chain_seq,
        "older_than": format_timestamp(utcnow() - timedelta(days=395)),
    }
    if form == "with first_kept":
        changes |= {"first_kept": {"0": [after.chain_seq, after.hash]}, "days": 395}
    with app.app_context():
        db.session.execute(
            text("DELETE FROM audit_entries WHERE chain = 0 AND chain_seq <= :n"),
            {"n": lifted.chain_seq},
        )
        note(db.session, services.PRUNE, changes)
        db.session.commit()
        db.session.remove()
    for args in ((), ("--anchor", anchor)):
        code, output = verify(app, *args)
        assert code == 1, output
        assert f"BROKEN at entry {after.seq}" in output
        if form == "with first_kept":
            assert "younger than the retention of 395 days" in output
        else:
            assert "an unchecked prune" in output


def test_a_prune_written_before_issue_36_passes_once_the_entry_after_it_is_old(
    app: Flask, trail: list[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    # The old prune removed every entry before its cutoff and recorded no `first_kept`.
    entries = chain_zero(app)
    last_removed = entries[-2]
    with app.app_context():
        db.session.execute(
            text("DELETE FROM audit_entries WHERE chain = 0 AND chain_seq <= :n"),
            {"n": last_removed.chain_seq},
        )
        note(
            db.session,
            services.PRUNE,
            {
                "chains": {"0": [last_removed.chain_seq, last_removed.hash]},
                "removed": last_removed.chain_seq,
                "older_than": format_timestamp(utcnow() - timedelta(days=395)),
            },
        )
        db.session.commit()
        db.session.remove()
    code, output = verify(app)
    assert code == 1 and f"BROKEN at entry {entries[-1].seq}" in output
    assert "an unchecked prune" in output
    written_at(monkeypatch, utcnow() + timedelta(days=396))
    code, output = verify(app)
    assert code == 0, output


def test_a_prune_of_entries_younger_than_the_retention_fails(app: Flask, trail: list[str]) -> None:
    # The service's own prune, told that it is a year later than it is: what it removes is
    # younger than the retention at the time its entry carries.
    with app.app_context():
        removed = services.prune(db.session, 395, now=utcnow() + timedelta(days=396))
        db.session.remove()
    assert removed > 0
    code, output = verify(app)
    assert code == 1
    *_, prune = kept = chain_zero(app)
    first = kept[0]
    assert output == (
        f"audit trail BROKEN at entry {first.seq}: chain 0: the prune at entry {prune.seq} "
        f"removed entries written before entry {first.seq} of {format_timestamp(first.at)}, "
        "younger than the retention of 395 days at the prune's time "
        f"{format_timestamp(prune.at)}\n"
    )


def test_prune_keeps_the_trail_verifiable_from_the_first_entry_kept(
    app: Flask, trail: list[str], api: Api, alice: Account, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The fixture's entries are "now"; these are 400 days later, a prune then removes all of
    # the fixture's entries but the newest of them (kept as the proof of the removal's age).
    old = chain_zero(app)
    later = utcnow() + timedelta(days=400)
    written_at(monkeypatch, later)
    assert api.patch(trail[0], alice, {"titel": "Ein Jahr später"}).status_code == 200
    with app.app_context():
        removed = services.prune(db.session, 395)
        db.session.remove()
    assert removed == len(old) - 1
    assert api.patch(trail[0], alice, {"titel": "Nach dem Aufräumen"}).status_code == 200
    code, output = verify(app)
    assert code == 0, output
    kept = chain_zero(app)
    assert (kept[0].chain_seq, kept[0].hash) == (old[-1].chain_seq, old[-1].hash)
    prune = next(entry for entry in kept if entry.action == "audit.prune")
    recorded = json.loads(prune.changes)
    assert recorded["removed"] == removed and recorded["days"] == 395
    assert recorded["chains"] == {"0": [old[-2].chain_seq, old[-2].hash]}
    assert recorded["first_kept"] == {"0": [old[-1].chain_seq, old[-1].hash]}
    assert prune.actor == "system"
    # Pruning again removes nothing and writes nothing; the trail still verifies.
    with app.app_context():
        assert services.prune(db.session, 395) == 0
        db.session.remove()
    assert len(chain_zero(app)) == len(kept)
    # Removing an entry kept after the prune is still caught.
    sql(app, "DELETE FROM audit_entries WHERE seq = :s", s=prune.seq)
    assert verify(app)[0] == 1


def test_an_anchor_older_than_the_retention_survives_a_prune_of_its_entries(
    app: Flask, trail: list[str], api: Api, alice: Account, monkeypatch: pytest.MonkeyPatch
) -> None:
    old_anchor = anchor_now(app)
    now = utcnow()
    written_at(monkeypatch, now + timedelta(days=1))
    assert api.patch(trail[0], alice, {"titel": "Am Tag danach"}).status_code == 200
    written_at(monkeypatch, now + timedelta(days=400))
    assert api.patch(trail[0], alice, {"titel": "Ein Jahr später"}).status_code == 200
    with app.app_context():
        assert services.prune(db.session, 395) > 0
        db.session.remove()
    # The anchor's entry (the fixture's last) was not the newest old one: it is gone, by a
    # prune more than the retention after the anchor was taken.
    code, output = verify(app, "--anchor", old_anchor)
    assert code == 0, output
    assert output.splitlines()[1] == (
        "note: the anchor's entries of chain(s) 0 were pruned under the retention, so it no "
        "longer pins the chains: keep a newer anchor"
    )
    # An anchor of the old form (no time) cannot show that the removal was allowed.
    code, output = verify(app, "--anchor", old_anchor.partition("@")[0])
    prune = next(e for e in chain_zero(app) if e.action == PRUNE)
    length = old_anchor.partition(":")[2].split(",")[0]
    assert code == 1
    assert output == (
        f"audit trail BROKEN: chain 0: the prune at entry {prune.seq} removed entry {length} "
        "named by the anchor, and the anchor carries no time to show that the retention "
        "allowed it\n"
    )
    assert verify(app, "--anchor", anchor_now(app))[0] == 0


def test_a_prune_cannot_cover_an_anchor_younger_than_the_retention(
    app: Flask, trail: list[str], api: Api, alice: Account, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Written a year and more ago, anchored ten days ago, then entries written after the
    # anchor but dated before it (as a rewrite by someone with the database and this code
    # dates them): a prune now removes the anchor's entry as if it were old.
    now = utcnow()
    written_at(monkeypatch, now - timedelta(days=10))
    anchor = anchor_now(app)
    written_at(monkeypatch, now - timedelta(days=399))
    assert api.patch(trail[0], alice, {"titel": "Zurückdatiert"}).status_code == 200
    written_at(monkeypatch, now)
    assert api.patch(trail[0], alice, {"titel": "Heute"}).status_code == 200
    with app.app_context():
        assert services.prune(db.session, 395, now=now) > 0
        db.session.remove()
    # Without the anchor the chain cannot tell (its first kept entry is dated old enough).
    assert verify(app)[0] == 0
    code, output = verify(app, "--anchor", anchor)
    assert code == 1, output
    assert "before the retention of 395 days allowed it" in output


def test_prune_by_command_keeps_at_least_the_retention(app: Flask, trail: list[str]) -> None:
    result = app.test_cli_runner().invoke(args=["audit", "prune", "--days", "30"])
    assert result.exit_code == 2 and "lower that setting instead" in result.output
    result = app.test_cli_runner().invoke(args=["audit", "prune", "--days", "400"])
    assert result.exit_code == 0 and "removed 0 entries older than 400 days" in result.output


def test_prune_by_command_removes_nothing_younger_than_the_retention(
    app: Flask, trail: list[str]
) -> None:
    before = last_seq(app)
    result = app.test_cli_runner().invoke(args=["audit", "prune"])
    assert result.exit_code == 0, result.output
    assert "removed 0 entries older than 395 days" in result.output
    assert last_seq(app) == before


def test_export_writes_json_lines_in_a_time_window(app: Flask, trail: list[str]) -> None:
    result = app.test_cli_runner().invoke(args=["audit", "export"])
    assert result.exit_code == 0
    lines = [json.loads(line) for line in result.output.splitlines()]
    assert [entry["seq"] for entry in lines] == list(range(1, last_seq(app) + 1))
    assert {"seq", "at", "actor", "action", "record_id", "changes", "hash"} <= set(lines[0])
    tomorrow = (utcnow() + timedelta(days=1)).date().isoformat()
    result = app.test_cli_runner().invoke(args=["audit", "export", "--since", tomorrow])
    assert result.exit_code == 0 and result.output == ""
    result = app.test_cli_runner().invoke(args=["audit", "export", "--until", tomorrow])
    assert len(result.output.splitlines()) == len(lines)
    result = app.test_cli_runner().invoke(args=["audit", "export", "--since", "gestern"])
    assert result.exit_code == 2 and "Invalid value" in result.output


def test_an_anchor_of_another_number_of_chains_fails_and_says_so(
    app: Flask, trail: list[str]
) -> None:
    anchor = anchor_now(app)
    heads, _, taken = anchor.partition("@")
    digest, _, lengths = heads.partition(":")
    fewer = f"{digest}:{lengths.rsplit(',', 1)[0]}@{taken}"
    more = f"{digest}:{lengths},0@{taken}"
    for other in (fewer, more):
        code, output = verify(app, "--anchor", other)
        assert code == 1, output
        assert output == "audit trail BROKEN: the anchor names another number of chains\n"


# --- several chains (issue 37: a prune or an anchor of one chain must not touch another) ---


def in_chain(monkeypatch: pytest.MonkeyPatch, n: int) -> None:
    """From now on this process's entries go to chain `n` (as a writer does whose lower
    chains other transactions hold)."""

    def locked(session: object) -> object:
        return db.session.execute(
            select(AuditChainHead.id, AuditChainHead.last_seq, AuditChainHead.last_hash).where(
                AuditChainHead.id == n
            )
        ).one()

    monkeypatch.setattr("app.audit.trail._lock_a_chain", locked)


def chains(app: Flask) -> dict[int, list[tuple[int, str]]]:
    """Each chain's (chain_seq, action), in order."""
    with app.app_context():
        rows = db.session.execute(
            select(AuditEntry.chain, AuditEntry.chain_seq, AuditEntry.action).order_by(
                AuditEntry.chain, AuditEntry.chain_seq
            )
        ).all()
        db.session.remove()
    found: dict[int, list[tuple[int, str]]] = {}
    for chain, chain_seq, action in rows:
        found.setdefault(chain, []).append((chain_seq, action))
    return found


def truncate(app: Flask, chain: int, to: int) -> None:
    """Entries of `chain` after `to` deleted, and its head moved back to match: the chain
    alone verifies, only an anchor tells."""
    with app.app_context():
        last = db.session.scalar(
            select(AuditEntry.hash).where(AuditEntry.chain == chain, AuditEntry.chain_seq == to)
        )
        db.session.execute(
            text("DELETE FROM audit_entries WHERE chain = :c AND chain_seq > :n"),
            {"c": chain, "n": to},
        )
        db.session.execute(
            text("UPDATE audit_chain_heads SET last_seq = :n, last_hash = :h WHERE id = :c"),
            {"n": to, "h": last or services.GENESIS, "c": chain},
        )
        db.session.commit()
        db.session.remove()


def test_a_prune_of_several_chains_removes_each_chains_old_entries_and_no_others(
    app: Flask, trail: list[str], api: Api, alice: Account, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Chain 0: the fixture's entries, now. Chain 1: three entries a day later and one the
    # day after; chain 2: one entry a day later. The prune's cutoff is that day after to the
    # second: an entry written at the cutoff is not older than it, and stays.
    rid = trail[0]
    zero = len(chains(app)[0])
    day = utcnow().replace(microsecond=0) + timedelta(days=1)
    written_at(monkeypatch, day)
    in_chain(monkeypatch, 1)
    for titel in ("Eins", "Zwei", "Drei"):
        assert api.patch(rid, alice, {"titel": f"Kette 1: {titel}"}).status_code == 200
    in_chain(monkeypatch, 2)
    assert api.patch(rid, alice, {"titel": "Kette 2"}).status_code == 200
    written_at(monkeypatch, day + timedelta(days=1))
    in_chain(monkeypatch, 1)
    assert api.patch(rid, alice, {"titel": "Kette 1: Vier"}).status_code == 200
    in_chain(monkeypatch, 0)
    assert api.patch(rid, alice, {"titel": "Kette 0"}).status_code == 200
    before = chains(app)
    assert [len(before[c]) for c in (0, 1, 2)] == [zero + 1, 4, 1]
    # An anchor names every chain's head; each is looked up in its own chain.
    anchor = anchor_now(app)
    assert verify(app, "--anchor", anchor)[0] == 0

    written_at(monkeypatch, day + timedelta(days=1 + 395))
    result = app.test_cli_runner().invoke(args=["audit", "prune"])
    assert result.exit_code == 0, result.output
    removed = (zero - 1) + 2
    assert result.output == f"removed {removed} entries older than 395 days\n"
    after = chains(app)
    assert after[0] == before[0][zero - 1 :] + [(zero + 2, "audit.prune")]
    assert after[1] == before[1][2:]
    assert after[2] == before[2]
    with app.app_context():
        recorded = json.loads(
            db.session.scalar(select(AuditEntry.changes).where(AuditEntry.action == PRUNE))
        )
        db.session.remove()
    assert recorded["removed"] == removed and recorded["days"] == 395
    assert recorded["older_than"] == format_timestamp(day + timedelta(days=1))
    assert set(recorded["chains"]) == set(recorded["first_kept"]) == {"0", "1"}
    assert [recorded["chains"][c][0] for c in ("0", "1")] == [zero - 1, 2]
    assert [recorded["first_kept"][c][0] for c in ("0", "1")] == [zero, 3]
    code, output = verify(app)
    assert code == 0, output
    assert output.startswith("audit trail intact: 6 entries; anchor ")  # 3 + 2 + 1
    # Every anchored head is still there (chain 2's only entry was not older than another).
    code, output = verify(app, "--anchor", anchor)
    assert (code, output.count("\n")) == (0, 1), output

    # The end of a chain cut off, its head moved back: the chain alone verifies, the anchor
    # taken after the prune does not, whether the chain was pruned or not.
    anchor = anchor_now(app)
    truncate(app, 2, 0)
    assert verify(app)[0] == 0
    code, output = verify(app, "--anchor", anchor)
    assert code == 1
    assert output == (
        "audit trail BROKEN: chain 2 no longer holds its entry 1 named by the anchor\n"
    )
    truncate(app, 1, 3)  # chain 1 now starts after the prune, at its entry 3
    assert verify(app)[0] == 0
    code, output = verify(app, "--anchor", anchor)
    assert code == 1
    assert output == (
        "audit trail BROKEN: chain 1 no longer holds its entry 4 named by the anchor\n"
    )


def test_the_chains_order_place_and_heads_are_each_checked_with_their_own_message(
    app: Flask, trail: list[str], api: Api, alice: Account, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Chain 1 written after chain 0: every head past the first is compared too.
    in_chain(monkeypatch, 1)
    assert api.patch(trail[0], alice, {"titel": "Kette 1"}).status_code == 200
    assert api.patch(trail[0], alice, {"titel": "Kette 1 wieder"}).status_code == 200
    assert verify(app)[0] == 0
    one = chain_zero(app, 1)
    # Two entries of chain 1 swap their numbers across chains (not in the hash).
    a, b = one[0].seq, one[1].seq
    sql(app, "UPDATE audit_entries SET seq = 0 WHERE seq = :a", a=a)
    sql(app, "UPDATE audit_entries SET seq = :a WHERE seq = :b", a=a, b=b)
    sql(app, "UPDATE audit_entries SET seq = :b WHERE seq = 0", b=b)
    code, output = verify(app)
    assert (code, output) == (
        1,
        f"audit trail BROKEN at entry {a}: entry {a} is out of order in chain 1\n",
    )
    sql(app, "UPDATE audit_entries SET seq = 0 WHERE seq = :a", a=a)
    sql(app, "UPDATE audit_entries SET seq = :a WHERE seq = :b", a=a, b=b)
    sql(app, "UPDATE audit_entries SET seq = :b WHERE seq = 0", b=b)
    assert verify(app)[0] == 0
    # The head of chain 1 names another hash at the same length.
    sql(app, "UPDATE audit_chain_heads SET last_hash = :h WHERE id = 1", h="0" * 64)
    code, output = verify(app)
    assert (code, output) == (
        1,
        "audit trail BROKEN: chain 1: its last entry was replaced (not the chain's head)\n",
    )
    sql(app, "UPDATE audit_chain_heads SET last_hash = :h WHERE id = 1", h=one[1].hash)
    # An entry moved to a chain there is no head of.
    sql(app, "UPDATE audit_entries SET chain = 99 WHERE seq = :b", b=b)
    code, output = verify(app)
    assert (code, output) == (
        1,
        f"audit trail BROKEN at entry {b}: entry {b} is in chain 99, which does not exist\n",
    )


def test_verify_called_with_what_is_not_an_anchor_says_so(app: Flask, trail: list[str]) -> None:
    # The command refuses such a value before (a usage error); the service says it too.
    with app.app_context():
        verdict = services.verify(db.session, "f" * 64 + ":1,x")
        db.session.remove()
    assert (verdict.ok, verdict.problem) == (
        False,
        "the anchor is not one that `flask audit verify` printed",
    )


def test_export_reads_a_long_trail_in_batches_each_entry_once(app: Flask) -> None:
    # More entries than a batch holds (1000), read by the keyset from one batch to the next.
    count = 2345
    with app.app_context():
        at = utcnow()
        db.session.execute(
            AuditEntry.__table__.insert(),
            [
                {
                    "seq": 10_000 + n,
                    "chain": 7,
                    "chain_seq": n,
                    "at": at,
                    "actor": "system",
                    "action": "account.update",
                    "changes": "{}",
                    "prev_hash": "0" * 64,
                    "hash": f"{n:064x}",
                }
                for n in range(1, count + 1)
            ],
        )
        db.session.commit()
        db.session.remove()
    result = app.test_cli_runner().invoke(args=["audit", "export"])
    assert result.exit_code == 0
    seqs = [json.loads(line)["seq"] for line in result.output.splitlines()]
    written = list(range(10_001, 10_001 + count))
    assert seqs[-count:] == written and len(seqs) == len(set(seqs))


@pytest.mark.parametrize("form", ["as before issue 36", "with first_kept", "at the retention"])
def test_a_prune_is_checked_against_the_retention_to_the_microsecond(
    app: Flask, api: Api, alice: Account, monkeypatch: pytest.MonkeyPatch, form: str
) -> None:
    # Entries written at `day`; a prune (written by hand, as the service records one) removes
    # those before the first of them, so that one, written exactly at `day`, starts chain 0.
    day = utcnow().replace(microsecond=0) + timedelta(days=1)
    written_at(monkeypatch, day)
    rid = api.create(alice, titel="Eins")["id"]
    assert api.patch(rid, alice, {"titel": "Zwei"}).status_code == 200
    entries = chain_zero(app)
    first = next(e for e in entries if e.at == day)
    removed = entries[first.chain_seq - 2]
    changes: dict[str, object] = {
        "chains": {"0": [removed.chain_seq, removed.hash]},
        "removed": removed.chain_seq,
    }
    if form != "as before issue 36":
        changes |= {"first_kept": {"0": [first.chain_seq, first.hash]}, "days": 395}
    retention = timedelta(days=395)
    # The old form is checked at verify's time: once the first entry kept is older than
    # the retention. The new one at the prune's time, and a prune dated after verify's
    # clock by more than SKEW is forged.
    pruned_at = (
        day + retention + (timedelta(seconds=1) if form == "with first_kept" else timedelta())
    )
    written_at(monkeypatch, pruned_at)
    with app.app_context():
        db.session.execute(
            text("DELETE FROM audit_entries WHERE chain = 0 AND chain_seq <= :n"),
            {"n": removed.chain_seq},
        )
        note(db.session, services.PRUNE, changes)
        db.session.commit()
        prune = db.session.scalar(select(AuditEntry.seq).where(AuditEntry.action == PRUNE))
        db.session.remove()
    if form == "as before issue 36":
        # At `day` + the retention the entry is not yet older than it; a microsecond later it is.
        code, output = verify(app)
        assert (code, output) == (
            1,
            f"audit trail BROKEN at entry {first.seq}: chain 0: the entries before entry "
            f"{first.seq} were removed by the prune at entry {prune}, which does not show "
            "that the retention allowed it (an unchecked prune: entry "
            f"{first.seq} is younger than 395 days)\n",
        )
        written_at(monkeypatch, pruned_at + timedelta(microseconds=1))
        assert verify(app)[0] == 0
        return
    if form == "at the retention":
        # The entry kept was not older than the retention at the prune's time: it was as old.
        code, output = verify(app)
        assert (code, output) == (
            1,
            f"audit trail BROKEN at entry {first.seq}: chain 0: the prune at entry {prune} "
            f"removed entries written before entry {first.seq} of {format_timestamp(day)}, "
            "younger than the retention of 395 days at the prune's time "
            f"{format_timestamp(pruned_at)}\n",
        )
        return
    # Verify's clock SKEW behind the prune's: still not in the future.
    written_at(monkeypatch, pruned_at - services.SKEW)
    assert verify(app)[0] == 0
    written_at(monkeypatch, pruned_at - services.SKEW - timedelta(microseconds=1))
    code, output = verify(app)
    assert (code, output) == (
        1,
        f"audit trail BROKEN at entry {first.seq}: the prune at entry {prune} is dated in "
        "the future\n",
    )


def test_an_anchor_pruned_exactly_the_retention_less_the_skew_later_is_outlived_in_each_chain(
    app: Flask, api: Api, alice: Account, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Chains 0 and 1 each end at `day` when the anchor is taken; after it, each gets an entry
    # dated ten minutes before the anchor, then a prune dated the retention less SKEW after
    # the anchor removes the anchored entries (the backdated ones are kept as older than the
    # cutoff): the latest a prune of them may be, so the anchor is outlived in both chains.
    day = utcnow().replace(microsecond=0) + timedelta(days=1)
    written_at(monkeypatch, day)
    rid = api.create(alice, titel="Null")["id"]
    in_chain(monkeypatch, 1)
    assert api.patch(rid, alice, {"titel": "Eins"}).status_code == 200
    anchor = anchor_now(app)
    written_at(monkeypatch, day - timedelta(minutes=10))
    assert api.patch(rid, alice, {"titel": "Eins, zurückdatiert"}).status_code == 200
    in_chain(monkeypatch, 0)
    assert api.patch(rid, alice, {"titel": "Null, zurückdatiert"}).status_code == 200
    written_at(monkeypatch, day + timedelta(days=395) - services.SKEW)
    with app.app_context():
        assert services.prune(db.session, 395) > 0
        db.session.remove()
    assert [len(entries) for c, entries in sorted(chains(app).items())] == [2, 1]
    code, output = verify(app, "--anchor", anchor)
    assert code == 0, output
    assert output.splitlines()[1] == (
        "note: the anchor's entries of chain(s) 0, 1 were pruned under the retention, so it "
        "no longer pins the chains: keep a newer anchor"
    )
