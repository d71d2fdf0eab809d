"""Covers are made by hand here (`Covers.make`, what `flask covers make` and the thread do):
the tests see a record before and after its pictures are made."""

from __future__ import annotations

import io
import json
import uuid
from typing import Any

import pytest
from flask import Flask
from PIL import Image
from sqlalchemy import select

from app.covers import making
from app.extensions import db
from app.models import Cover
from tests.support.api import Account, Api


class Covers:
    def __init__(self, api: Api) -> None:
        self.api = api
        self.app: Flask = api.app

    def make(self) -> Any:
        with self.app.app_context():
            try:
                return making.make_due()
            finally:
                db.session.remove()

    def rows(self, record_id: str | None = None) -> list[Cover]:
        with self.app.app_context():
            query = select(Cover).order_by(Cover.id)
            if record_id is not None:
                query = query.where(Cover.record_id == uuid.UUID(record_id))
            found = list(db.session.scalars(query))
            db.session.expunge_all()
            db.session.remove()
            return found

    def keys(self) -> set[str]:
        """The objects covers hold in storage (pictures and owners' uploads)."""
        return {key for key in self.api.objects() if key.startswith("covers/")}

    def get(self, record_id: str, name: str = "1200.jpg", **headers: str) -> Any:
        return self.api.client.get(f"/records/{record_id}/cover/{name}", headers=headers)

    def put(self, record_id: str, account: Account, data: bytes) -> Any:
        return self.api.client.put(
            f"/api/files/{record_id}/cover",
            data=data,
            headers={**account.auth, "Content-Type": "application/octet-stream"},
        )

    def delete(self, record_id: str, account: Account) -> Any:
        return self.api.client.delete(f"/api/files/{record_id}/cover", headers=account.auth)

    def status(self, record_id: str, account: Account) -> dict[str, Any]:
        response = self.api.client.get(f"/api/files/{record_id}/cover", headers=account.auth)
        assert response.status_code == 200, response.get_json()
        return response.get_json()


def picture(response: Any) -> Image.Image:
    """The picture an answer carries, decoded."""
    image = Image.open(io.BytesIO(response.get_data()))
    image.load()
    return image


def objects_of(row: Cover) -> dict[str, list[Any]]:
    return json.loads(row.objects or "{}")


def coloured_png(colour: str, size: tuple[int, int] = (300, 200)) -> bytes:
    out = io.BytesIO()
    Image.new("RGB", size, colour).save(out, "PNG")
    return out.getvalue()


def pdf_page(colour: tuple[float, float, float] = (0, 0, 1)) -> bytes:
    """A one-page A4 PDF filled with `colour` (raw PDF text; its first page is what the cover
    shows)."""
    content = b"%.2f %.2f %.2f rg 0 0 595 842 re f" % colour
    return raw_pdf(
        [
            b"<</Type /Catalog /Pages 2 0 R>>",
            b"<</Type /Pages /Kids [3 0 R] /Count 1>>",
            b"<</Type /Page /Parent 2 0 R /MediaBox [0 0 595 842] /Contents 4 0 R>>",
            b"<</Length %d>>stream\n" % len(content) + content + b"\nendstream",
        ]
    )


def raw_pdf(objects: list[bytes]) -> bytes:
    """A PDF of these objects (numbered from 1, the first the catalog), with its xref table."""
    out = io.BytesIO()
    out.write(b"%PDF-1.4\n")
    offsets = []
    for number, body in enumerate(objects, start=1):
        offsets.append(out.tell())
        out.write(b"%d 0 obj\n" % number + body + b"\nendobj\n")
    xref = out.tell()
    out.write(b"xref\n0 %d\n0000000000 65535 f \n" % (len(objects) + 1))
    out.write(b"".join(b"%010d 00000 n \n" % offset for offset in offsets))
    out.write(
        b"trailer <</Size %d /Root 1 0 R>>\nstartxref\n%d\n%%%%EOF\n" % (len(objects) + 1, xref)
    )
    return out.getvalue()


@pytest.fixture
def covers(api: Api) -> Covers:
    return Covers(api)
