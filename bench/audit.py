"""What the audit trail costs concurrent writers (issue 23): 8 clients PATCH their records at
once, against the service as it is and against the same code without the trail's listeners
(``without="audit-trail"``), on PostgreSQL (where writers really run side by side),
alternating in one run.

Target: PATCHes per second with the trail at least 0.9 of those without.

    python -m bench.audit [--clients 8] [--patches 150] [--repetitions 3]
"""

from __future__ import annotations

import argparse
import http.client
import json
import sys
import threading
import time

from bench.common import (
    Postgres,
    Server,
    app_env,
    app_server,
    log,
    login,
    make_user,
    median,
    prepare_database,
    print_table,
    workspace,
)

TARGET = 0.9


def prepare(server: Server, env: dict[str, str], clients: int) -> list[tuple[str, list[str]]]:
    """One account per client, each with one record, made through the API."""
    sessions = []
    for n in range(clients):
        email, password = f"writer{n}@example.org", "bench-password"
        make_user(env, email, password)
        token = login(server.port, email, password)
        boundary = "benchboundary"
        body = (
            f'--{boundary}\r\nContent-Disposition: form-data; name="files[]"; '
            f'filename="n.txt"\r\nContent-Type: text/plain\r\n\r\nhello {n}\r\n'
            f"--{boundary}--\r\n"
        ).encode()
        conn = http.client.HTTPConnection("127.0.0.1", server.port, timeout=60)
        conn.request(
            "POST",
            "/api/files",
            body,
            {
                "Authorization": f"Bearer {token}",
                "Content-Type": f"multipart/form-data; boundary={boundary}",
            },
        )
        response = conn.getresponse()
        data = response.read()
        conn.close()
        if response.status != 201:
            raise RuntimeError(f"upload failed: {response.status} {data[:200]!r}")
        sessions.append((token, [json.loads(data)["files"][0]["id"]]))
    return sessions


def patch_rate(server: Server, sessions: list[tuple[str, list[str]]], patches: int) -> float:
    """PATCHes per second of all clients together, each on its own keep-alive connection."""
    errors: list[str] = []
    start = threading.Barrier(len(sessions) + 1)

    def client(token: str, record_id: str, n: int) -> None:
        conn = http.client.HTTPConnection("127.0.0.1", server.port, timeout=60)
        headers = {"Authorization": f"Bearer {token}", "Content-Type": "application/json"}
        start.wait()
        for i in range(patches):
            body = json.dumps({"titel": f"Bericht {n}-{i}", "reihenfolge": i}).encode()
            conn.request("PATCH", f"/api/files/{record_id}", body, headers)
            response = conn.getresponse()
            response.read()
            if response.status != 200:
                errors.append(str(response.status))
        conn.close()

    threads = [
        threading.Thread(target=client, args=(token, ids[0], n))
        for n, (token, ids) in enumerate(sessions)
    ]
    for thread in threads:
        thread.start()
    start.wait()
    began = time.perf_counter()
    for thread in threads:
        thread.join()
    elapsed = time.perf_counter() - began
    if errors:
        raise RuntimeError(f"{len(errors)} PATCHes failed: {errors[:5]}")
    return len(sessions) * patches / elapsed


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--clients", type=int, default=8)
    parser.add_argument("--patches", type=int, default=150, help="per client and repetition")
    parser.add_argument("--repetitions", type=int, default=3)
    args = parser.parse_args()

    postgres = Postgres()
    with workspace("audit") as work:
        servers = []
        try:
            contenders = {}
            for name, without in (("trail", ""), ("no trail", "audit-trail")):
                env = app_env(
                    postgres.create("bench_audit"),
                    {"STORAGE_BACKEND": "local", "STORAGE_LOCAL_ROOT": str(work / name)},
                    work / f"{name}-tmp",
                )
                prepare_database(env)
                started = app_server(name.replace(" ", "-"), env, work, without=without)
                servers.append(started)
                contenders[name] = (started, prepare(started, env, args.clients))
            rates: dict[str, list[float]] = {name: [] for name in contenders}
            for repetition in range(args.repetitions):
                order = list(contenders) if repetition % 2 == 0 else list(reversed(contenders))
                for name in order:
                    started, sessions = contenders[name]
                    rates[name].append(patch_rate(started, sessions, args.patches))
                    log(f"{name}: {rates[name][-1]:.0f} PATCH/s")
        finally:
            for started in servers:
                started.stop()
            postgres.drop_all()
    with_trail, without = median(rates["trail"]), median(rates["no trail"])
    ratio = with_trail / without
    print_table(
        ["contender", "PATCH/s (median)", "runs"],
        [
            ["with the trail", f"{with_trail:.0f}", ", ".join(f"{r:.0f}" for r in rates["trail"])],
            [
                "without",
                f"{without:.0f}",
                ", ".join(f"{r:.0f}" for r in rates["no trail"]),
            ],
        ],
    )
    verdict = "PASS" if ratio >= TARGET else "FAIL"
    print(f"ratio with/without: {ratio:.3f} (target >= {TARGET}): {verdict}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
