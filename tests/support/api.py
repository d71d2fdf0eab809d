"""A thin client for the API tests: accounts, uploads, and what the database and bucket hold."""

from __future__ import annotations

import io
import uuid
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from flask import Flask
from flask.testing import FlaskClient
from sqlalchemy import func, select, text, update

from app.auth.services import create_user, issue_token
from app.extensions import db
from app.models import ApiToken, FileRecord, User
from tests.support import samples

TIMESTAMP_FORMAT = "%Y-%m-%dT%H:%M:%S.%fZ"

_FIELDS = [
    "id",
    "aktiv_id",
    "original_name",
    "path",
    "mime_type",
    "size",
    "reprotyp",
    "titel",
    "beschreibung",
    "autoren",
    "sachschlagwoerter",
    "org_themen",
    "iab_themen",
    "sperrfrist",
    "reihenfolge",
    "freigabe",
    "erstellt_von",
    "freigegeben_von",
    "created_at",
]
#: Issue 49: who made it and what it belongs to.
STRUCTURED_FIELDS = ["creators", "related_identifiers", "series"]
CREATE_FIELDS = [*_FIELDS, "version", *STRUCTURED_FIELDS]
RECORD_FIELDS = [*_FIELDS, "updated_at", "version", *STRUCTURED_FIELDS]
PUBLIC_FIELDS = [f for f in RECORD_FIELDS if f not in ("erstellt_von", "freigegeben_von")]


@dataclass
class Account:
    id: int
    email: str
    password: str
    token: str

    @property
    def auth(self) -> dict[str, str]:
        return {"Authorization": f"Bearer {self.token}"}

    @property
    def token_id(self) -> int:
        return int(self.token.partition("|")[0])


# The first account's token id is its user id plus this; see `renumber_token`.
FIRST_TOKEN_OFFSET = 1000


def renumber_token(user_id: int, token: str) -> str:
    """Give a new account's token an id that is not its user id but another account's.

    Issued right after its account, a token would get the same number as its user id on a
    fresh database, and code that takes one for the other would pass every test. Here the
    token takes the user id of the account created just before (bob's token id is alice's
    user id), the first account's `FIRST_TOKEN_OFFSET` more than its own.
    """
    issued, _, secret = token.partition("|")
    previous = db.session.scalar(select(func.max(User.id)).where(User.id < user_id))
    taken = set(db.session.scalars(select(ApiToken.id))) - {int(issued)}
    candidates = [previous, user_id + FIRST_TOKEN_OFFSET, max(taken | {user_id}) + 1]
    wanted = next(c for c in candidates if c is not None and c != user_id and c not in taken)
    db.session.execute(update(ApiToken).where(ApiToken.id == int(issued)).values(id=wanted))
    if db.engine.dialect.name == "postgresql" and wanted > int(issued):
        # Tokens issued later must not run into this one.
        db.session.execute(
            text("SELECT setval(pg_get_serial_sequence('api_tokens', 'id'), :id)"),
            {"id": wanted},
        )
    db.session.commit()
    return f"{wanted}|{secret}"


def encode_multipart(
    parts: list[tuple[str, str | None, bytes, str | None]],
) -> tuple[str, bytes]:
    """A form body as curl writes it: quotes and backslashes in names escaped with a backslash.

    Werkzeug's test client leaves quotes in file names unescaped, which no real client does.
    """
    boundary = f"----test-{uuid.uuid4().hex}"

    def quoted(value: str) -> str:
        return value.replace("\\", "\\\\").replace('"', '\\"')

    out = io.BytesIO()
    for name, filename, data, content_type in parts:
        disposition = f'form-data; name="{quoted(name)}"'
        if filename is not None:
            disposition += f'; filename="{quoted(filename)}"'
        out.write(f"--{boundary}\r\nContent-Disposition: {disposition}\r\n".encode())
        if content_type:
            out.write(f"Content-Type: {content_type}\r\n".encode())
        out.write(b"\r\n" + data + b"\r\n")
    out.write(f"--{boundary}--\r\n".encode())
    return f"multipart/form-data; boundary={boundary}", out.getvalue()


def parse_timestamp(value: str) -> datetime:
    return datetime.strptime(value, TIMESTAMP_FORMAT).replace(tzinfo=UTC)


class Api:
    def __init__(self, app: Flask, client: FlaskClient) -> None:
        self.app = app
        self.client = client

    # accounts ---------------------------------------------------------------------------

    def account(self, email: str | None = None, *, admin: bool = False) -> Account:
        email = email or f"user-{uuid.uuid4().hex[:8]}@example.org"
        password = f"pw-{uuid.uuid4().hex}"
        with self.app.app_context():
            user = create_user(email, "Test User", password, is_admin=admin)
            token = renumber_token(user.id, issue_token(user, "tests"))
            return Account(user.id, user.email, password, token)

    # requests ---------------------------------------------------------------------------

    def upload(
        self,
        account: Account | None,
        files: list[tuple[str, bytes]] | None = None,
        *,
        field: str = "files[]",
        content_types: list[str] | None = None,
        **metadata: Any,
    ) -> Any:
        if files is None:
            files = [("report.pdf", samples.pdf_bytes())]
        parts: list[tuple[str, str | None, bytes, str | None]] = [
            (
                field,
                name,
                data,
                content_types[i] if content_types else "application/octet-stream",
            )
            for i, (name, data) in enumerate(files)
        ]
        parts += [(key, None, str(value).encode(), None) for key, value in metadata.items()]
        content_type, body = encode_multipart(parts)
        return self.client.post(
            "/api/files",
            data=body,
            headers=account.auth if account else {},
            content_type=content_type,
        )

    def create(
        self, account: Account, name: str = "report.pdf", data: bytes | None = None, **metadata: Any
    ) -> dict[str, Any]:
        """Upload one file and return its record; fails the test if the upload fails."""
        data = samples.pdf_bytes() if data is None else data
        response = self.upload(account, [(name, data)], **metadata)
        assert response.status_code == 201, response.get_json()
        return response.get_json()["files"][0]

    def replace(
        self,
        account: Account,
        record_id: str,
        name: str,
        data: bytes,
        *,
        change_note: str | None = None,
        headers: dict[str, str] | None = None,
    ) -> Any:
        parts: list[tuple[str, str | None, bytes, str | None]] = [
            ("file", name, data, "application/octet-stream")
        ]
        if change_note is not None:
            parts.append(("change_note", None, change_note.encode(), None))
        content_type, body = encode_multipart(parts)
        return self.client.post(
            f"/api/files/{record_id}/content",
            data=body,
            headers={**account.auth, **(headers or {})},
            content_type=content_type,
        )

    def get(self, path: str, account: Account | None = None, **kwargs: Any) -> Any:
        headers = dict(kwargs.pop("headers", {}))
        if account:
            headers.update(account.auth)
        return self.client.get(path, headers=headers, **kwargs)

    def patch(self, record_id: str, account: Account, body: Any) -> Any:
        return self.client.patch(f"/api/files/{record_id}", json=body, headers=account.auth)

    def delete(self, record_id: str, account: Account) -> Any:
        return self.client.delete(f"/api/files/{record_id}", headers=account.auth)

    # what is left behind ----------------------------------------------------------------

    def rows(self) -> list[FileRecord]:
        with self.app.app_context():
            records = db.session.scalars(select(FileRecord)).all()
            db.session.expunge_all()
            return list(records)

    def row(self, record_id: str) -> FileRecord | None:
        with self.app.app_context():
            record = db.session.get(FileRecord, uuid.UUID(record_id))
            db.session.expunge_all()
            return record

    def user(self, user_id: int) -> User:
        with self.app.app_context():
            user = db.session.get(User, user_id)
            db.session.expunge_all()
            assert user is not None
            return user

    def objects(self) -> set[str]:
        storage = self.app.extensions["storage"]
        return set(storage.iter_keys())

    def object_bytes(self, key: str) -> bytes:
        reader = self.app.extensions["storage"].open(key)
        try:
            return b"".join(reader)
        finally:
            reader.close()

    def set_columns(self, record_id: str, **values: Any) -> None:
        """Change columns directly, for states the API cannot produce (old timestamps)."""
        with self.app.app_context():
            record = db.session.get(FileRecord, uuid.UUID(record_id))
            assert record is not None
            for name, value in values.items():
                setattr(record, name, value)
            db.session.commit()
