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

from bench.common import (
    Postgres,
    Server,
    alternate,
    app_env,
    app_server,
    concurrent_rate,
    log,
    median,
    prepare_database,
    print_table,
    workspace,
    writers,
)

TARGET = 0.9
FORM = "multipart/form-data"


def patch_rate(server: Server, sessions: list[tuple[str, str]], patches: int) -> float:
    """PATCHes per second of all clients together, each on its own keep-alive connection."""

    def send(conn: http.client.HTTPConnection, n: int, i: int) -> int:
        token, record_id = sessions[n]
        headers = {"Authorization": f"Bearer {token}", "Content-Type": "application/json"}
        body = json.dumps({"titel": f"Bericht {n}-{i}", "reihenfolge": i}).encode()
        conn.request("PATCH", f"/api/files/{record_id}", body, headers)
        response = conn.getresponse()
        response.read()
        return response.status

    return concurrent_rate(server.port, len(sessions), patches, send)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--clients", type=int, default=8)
    parser.add_argument("--patches", type=int, default=150, help="per client and repetition")
    parser.add_argument("--repetitions", type=int, default=3)
    args = parser.parse_args()

    postgres = Postgres()
    with workspace("audit") as work:
        servers: dict[str, tuple[Server, list[tuple[str, str]]]] = {}
        try:
            for name, without in (("trail", ""), ("no trail", "audit-trail")):
                storage = {"STORAGE_BACKEND": "local", "STORAGE_LOCAL_ROOT": str(work / name)}
                env = app_env(postgres.create("bench_audit"), storage, work / f"{name}-tmp")
                prepare_database(env)
                server = app_server(name.replace(" ", "-"), env, work, without=without)
                servers[name] = (server, [])
                servers[name] = (server, writers(server, env, args.clients))

            def run(name: str) -> float:
                rate = patch_rate(*servers[name], args.patches)
                log(f"{name}: {rate:.0f} PATCH/s")
                return rate

            rates = alternate(args.repetitions, [(n, lambda _r, n=n: run(n)) for n in servers])
        finally:
            for server, _ in servers.values():
                server.stop()
            postgres.drop_all()
    with_trail, without_trail = median(rates["trail"]), median(rates["no trail"])
    print_table(
        ["contender", "PATCH/s (median)", "runs"],
        [[name, f"{median(r):.0f}", ", ".join(f"{x:.0f}" for x in r)] for name, r in rates.items()],
    )
    ratio = with_trail / without_trail
    verdict = "PASS" if ratio >= TARGET else "FAIL"
    print(f"ratio with/without: {ratio:.3f} (target >= {TARGET}): {verdict}")


if __name__ == "__main__":
    main()
