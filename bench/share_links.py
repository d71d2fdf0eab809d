"""How far an enumeration of share-link secrets gets (issue 24): one client address sends
10,000 guesses at `/api/shared/<secret>` against `flask serve` with the default failure limit
(`RATELIMIT_SHARE_LINK_FAILURES`), on SQLite and the local storage, over one keep-alive
connection. Reported: how many guesses were looked up at all (404) before the limit answered
429, how long the 10,000 took, and that a holder's good link from another address still works.

    python -m bench.share_links [--guesses 10000]
"""

from __future__ import annotations

import argparse
import http.client
import json
import secrets
import time
from collections import Counter
from datetime import UTC, datetime, timedelta

from bench.common import (
    app_server,
    log,
    login,
    make_user,
    prepare_database,
    request,
    sqlite_env,
    workspace,
)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--guesses", type=int, default=10_000)
    args = parser.parse_args()
    with workspace("share-links") as work:
        env = sqlite_env(work)
        prepare_database(env)
        make_user(env, "owner@example.org", "bench-password")
        server = app_server("share-links", env, work)
        try:
            token = login(server.port, "owner@example.org", "bench-password")
            auth = {"Authorization": f"Bearer {token}", "Content-Type": "application/json"}
            expires = (datetime.now(UTC) + timedelta(days=1)).strftime("%Y-%m-%dT%H:%M:%SZ")
            body = json.dumps({"path": "presse", "expires_at": expires}).encode()
            status, _, data = request(server.port, "POST", "/api/links", body, auth)
            assert status == 201, data
            good = "/api/shared/" + json.loads(data)["url"].rsplit("/", 1)[1]

            counts: Counter[int] = Counter()
            connection = http.client.HTTPConnection("127.0.0.1", server.port, timeout=30)
            started = time.perf_counter()
            for _ in range(args.guesses):
                connection.request("GET", f"/api/shared/{secrets.token_urlsafe(32)}")
                response = connection.getresponse()
                response.read()
                counts[response.status] += 1
            elapsed = time.perf_counter() - started
            connection.close()
            # The guessing address is refused even with a good link: no probing in between.
            good_status, headers, _ = request(server.port, "GET", good)
        finally:
            server.stop()
    others = {k: v for k, v in counts.items() if k not in (404, 429)}
    log(
        f"{args.guesses} guesses in {elapsed:.1f} s: {counts[404]} looked up (404), "
        f"{counts[429]} refused (429), other {others}; the good link from the guessing "
        f"address: {good_status} (Retry-After {headers.get('Retry-After')} s)"
    )
    result = {"guesses": args.guesses, "seconds": round(elapsed, 2), "good_link": good_status}
    print(json.dumps({**result, **{str(k): v for k, v in counts.items()}}))


if __name__ == "__main__":
    main()
