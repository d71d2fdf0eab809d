"""A released record's waiting change is a draft beside it (issue 46): a `file_versions` row
in state `draft` with the public fields, instead of JSON and five `pending_*` columns on the
release request.

Revision ID: 0027
Revises: 0026
Create Date: 2026-12-02

`file_versions` gains `state` (`ended` for every row there is) and the public fields
(null on the versions ended before). Every pending change moves into a draft row: the
record's public fields with the request's wanted ones over them, and its waiting content (or
the record's, without a key of its own). The downgrade moves drafts back onto their pending
requests.
"""

import json
from datetime import date

import sqlalchemy as sa
from alembic import op

revision = "0027"
down_revision = "0026"
branch_labels = None
depends_on = None

PUBLIC = (
    "aktiv_id",
    "path",
    "reprotyp",
    "titel",
    "beschreibung",
    "autoren",
    "sachschlagwoerter",
    "org_themen",
    "sperrfrist",
    "reihenfolge",
)
PENDING = (
    ("pending_fields", sa.Text()),
    ("pending_stored_path", sa.String(length=512)),
    ("pending_size", sa.BigInteger()),
    ("pending_mime_type", sa.String(length=255)),
    ("pending_original_name", sa.String(length=255)),
    ("pending_change_note", sa.Text()),
)


def _public_columns() -> list[sa.Column]:
    text = sa.String(length=255)
    types = dict.fromkeys(PUBLIC, text) | {
        "beschreibung": sa.Text(),
        "sperrfrist": sa.Date(),
        "reihenfolge": sa.Integer(),
    }
    return [sa.Column(name, types[name], nullable=True) for name in PUBLIC]


def upgrade() -> None:
    with op.batch_alter_table("file_versions") as table:
        table.add_column(
            sa.Column("state", sa.String(length=8), nullable=False, server_default="ended")
        )
        for column in _public_columns():
            table.add_column(column)
        table.alter_column("replaced_at", existing_type=sa.DateTime(timezone=True), nullable=True)
    bind = op.get_bind()
    pending = bind.execute(
        sa.text(
            "SELECT r.record_id, r.pending_fields, r.pending_stored_path, r.pending_size, "
            "r.pending_mime_type, r.pending_original_name, r.pending_change_note, "
            "f.checksum_sha256, f.size, f.mime_type, f.original_name, r.content_sha256, "
            + ", ".join(f"f.{name}" for name in PUBLIC)
            + " FROM release_requests r JOIN file_records f ON f.id = r.record_id "
            "WHERE r.state = 'pending' AND r.kind IN ('change', 'sperrfrist')"
        )
    ).mappings()
    versions = sa.table(
        "file_versions",
        *(
            sa.column(name)
            for name in (
                "record_id",
                "number",
                "state",
                "checksum_sha256",
                "size",
                "mime_type",
                "original_name",
                "change_note",
                "stored_path",
                *PUBLIC,
            )
        ),
    )
    for row in list(pending):
        wanted = json.loads(row["pending_fields"] or "{}")
        values = {name: wanted.get(name, row[name]) for name in PUBLIC}
        if isinstance(values["sperrfrist"], str):
            values["sperrfrist"] = date.fromisoformat(values["sperrfrist"])
        own = row["pending_stored_path"] is not None
        bind.execute(
            versions.insert().values(
                record_id=row["record_id"],
                number=0,
                state="draft",
                checksum_sha256=row["content_sha256"] if own else row["checksum_sha256"],
                size=row["pending_size"] if own else row["size"],
                mime_type=row["pending_mime_type"] if own else row["mime_type"],
                original_name=row["pending_original_name"] if own else row["original_name"],
                change_note=row["pending_change_note"],
                stored_path=row["pending_stored_path"],
                **values,
            )
        )
    with op.batch_alter_table("release_requests") as table:
        for name, _type in reversed(PENDING):
            table.drop_column(name)


def downgrade() -> None:
    with op.batch_alter_table("release_requests") as table:
        for name, type_ in PENDING:
            table.add_column(sa.Column(name, type_, nullable=True))
    bind = op.get_bind()
    drafts = bind.execute(
        sa.text(
            "SELECT v.*, "
            + ", ".join(f"f.{name} AS record_{name}" for name in PUBLIC)
            + ", f.checksum_sha256 AS record_sha256 FROM file_versions v "
            "JOIN file_records f ON f.id = v.record_id WHERE v.state = 'draft'"
        )
    ).mappings()
    for row in list(drafts):
        fields = {
            name: (row[name].isoformat() if hasattr(row[name], "isoformat") else row[name])
            for name in PUBLIC
            if row[name] != row[f"record_{name}"]
        }
        own = row["stored_path"] is not None
        bind.execute(
            sa.text(
                "UPDATE release_requests SET pending_fields = :fields, "
                "pending_stored_path = :key, pending_size = :size, pending_mime_type = :mime, "
                "pending_original_name = :name, pending_change_note = :note "
                "WHERE record_id = :record AND state = 'pending'"
            ),
            {
                "fields": json.dumps(fields, sort_keys=True, ensure_ascii=False),
                "key": row["stored_path"],
                "size": row["size"] if own else None,
                "mime": row["mime_type"] if own else None,
                "name": row["original_name"] if own else None,
                "note": row["change_note"],
                "record": row["record_id"],
            },
        )
    bind.execute(sa.text("DELETE FROM file_versions WHERE state = 'draft'"))
    with op.batch_alter_table("file_versions") as table:
        table.alter_column("replaced_at", existing_type=sa.DateTime(timezone=True), nullable=False)
        for name in reversed(PUBLIC):
            table.drop_column(name)
        table.drop_column("state")
