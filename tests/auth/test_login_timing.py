"""Login timing does not tell an unknown email from a wrong password."""

from __future__ import annotations

import statistics
import time

from app.auth.services import create_user

TRIES = 30


def test_unknown_email_and_wrong_password_take_the_same_time(make_sqlite_app):
    # Production hashing (Werkzeug's scrypt defaults), as the timing is the hash's.
    app = make_sqlite_app(PASSWORD_HASH_METHOD="scrypt")
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
