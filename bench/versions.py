"""What keeping released versions costs replacements (issue 39): clients replace the content
of their released records at once, against a server with ``KEEP_RELEASED_VERSIONS=on`` and
one with it off (the specification's deletion), on PostgreSQL with local storage, alternating
in one run. With it on each replacement keeps the old object and writes its version row;
with it off it writes the row and deletes the old object.

Target: replacements per second with versions kept at least 0.95 of those without.

    python -m bench.versions [--clients 4] [--replacements 40] [--size-kib 256] [--repetitions 3]
"""

from __future__ import annotations

import argparse
import http.client

from bench.common import (
    Postgres,
    Server,
    alternate,
    app_env,
    app_server,
    concurrent_rate,
    fresh_text,
    log,
    median,
    multipart,
    prepare_database,
    print_table,
    workspace,
    writers,
)

TARGET = 0.95


def replace_rate(
    server: Server, sessions: list[tuple[str, str]], replacements: int, size: int
) -> float:
    """Replacements per second of all clients together, each on its own connection."""
    bodies = [
        multipart("v.txt", fresh_text(size), "file") for _ in range(len(sessions) * replacements)
    ]

    def send(conn: http.client.HTTPConnection, n: int, i: int) -> int:
        token, record_id = sessions[n]
        body, headers = bodies[n * replacements + i]
        headers = {"Authorization": f"Bearer {token}", **headers}
        conn.request("POST", f"/api/files/{record_id}/content", body, headers)
        response = conn.getresponse()
        response.read()
        return response.status

    return concurrent_rate(server.port, len(sessions), replacements, send)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--clients", type=int, default=4)
    parser.add_argument("--replacements", type=int, default=40, help="per client and run")
    parser.add_argument("--size-kib", type=int, default=256)
    parser.add_argument("--repetitions", type=int, default=3)
    args = parser.parse_args()

    postgres = Postgres()
    with workspace("versions") as work:
        servers: dict[str, tuple[Server, list[tuple[str, str]]]] = {}
        try:
            for name, keep in (("kept", "on"), ("deleted", "off")):
                storage = {"STORAGE_BACKEND": "local", "STORAGE_LOCAL_ROOT": str(work / name)}
                env = app_env(
                    postgres.create("bench_versions"),
                    storage,
                    work / f"{name}-tmp",
                    KEEP_RELEASED_VERSIONS=keep,
                )
                prepare_database(env)
                server = app_server(name, env, work)
                servers[name] = (server, [])
                servers[name] = (server, writers(server, env, args.clients))

            def run(name: str) -> float:
                rate = replace_rate(*servers[name], args.replacements, args.size_kib * 1024)
                log(f"{name}: {rate:.1f} replacements/s")
                return rate

            rates = alternate(
                args.repetitions, [(n, lambda _r, n=n: run(n)) for n in servers], warmup=1
            )
        finally:
            for server, _ in servers.values():
                server.stop()
            postgres.drop_all()
    kept, deleted = median(rates["kept"]), median(rates["deleted"])
    print_table(
        ["old versions", "replacements/s (median)", "runs"],
        [[name, f"{median(r):.1f}", ", ".join(f"{x:.1f}" for x in r)] for name, r in rates.items()],
    )
    ratio = kept / deleted
    verdict = "PASS" if ratio >= TARGET else "FAIL"
    print(f"ratio kept/deleted: {ratio:.3f} (target >= {TARGET}): {verdict}")


if __name__ == "__main__":
    main()
