"""Login timing does not tell an unknown email from a wrong password."""

from __future__ import annotations

import shutil
import statistics
import time
from pathlib import Path

from app import create_app
from app.auth.services import create_user
from app.extensions import db
from tests.conftest import base_config

TRIES = 30


def test_unknown_email_and_wrong_password_take_the_same_time(tmp_path: Path, sqlite_template: Path):
    db_path = tmp_path / "db.sqlite3"
    shutil.copyfile(sqlite_template, db_path)
    # Production hashing (Werkzeug's scrypt defaults), as the timing is the hash's.
    app = create_app(
        base_config(
            SQLALCHEMY_DATABASE_URI=f"sqlite:///{db_path}",
            STORAGE_LOCAL_ROOT=str(tmp_path / "storage"),
            PASSWORD_HASH_METHOD="scrypt",
        )
    )
    with app.app_context():
        create_user("known@example.org", "Known", "the right password")
    client = app.test_client()

    def attempt(email: str) -> float:
        started = time.perf_counter()
        response = client.post(
            "/api/tokens", json={"email": email, "password": "wrong", "token_name": "t"}
        )
        elapsed = time.perf_counter() - started
        assert response.status_code == 422
        return elapsed

    attempt("warm-up@example.org")
    known, unknown = [], []
    for i in range(TRIES):  # interleaved, so drifts in machine load hit both alike
        known.append(attempt("known@example.org"))
        unknown.append(attempt(f"nobody-{i}@example.org"))
    median_known, median_unknown = statistics.median(known), statistics.median(unknown)
    difference = abs(median_known - median_unknown) / max(median_known, median_unknown)
    assert difference < 0.20, (median_known, median_unknown)
    with app.app_context():
        db.engine.dispose()
