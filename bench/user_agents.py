"""What a User-Agent's length costs the statistics flush (issue 36, finding 3): page views
with distinct 200 KB User-Agents against page views with distinct browser User-Agents, each
set counted through the request path's hook (`count_view`, in a request context with the
header) and flushed into a migrated SQLite database; the flush is timed.

Target: the long set's flush takes at most 1.5 times the short set's (a User-Agent over
`MAX_USER_AGENT` is cut in memory and counted as a machine unmatched). For scale, the
COUNTER lists' matching of one whole 200 KB User-Agent is timed too: what each such view
cost the flush before the bound.

    python -m bench.user_agents [--views 200] [--repetitions 5]
"""

from __future__ import annotations

import argparse
import logging
import time
import uuid
from typing import Any

from bench.common import log, median, prepare_database, print_table, sqlite_env, workspace

TARGET = 1.5
BROWSER = "Mozilla/5.0 (X11; Linux x86_64; rv:128.0) Gecko/20100101 Firefox/128.0"
LONG_BYTES = 200_000


def _agents(kind: str, views: int, round_: int) -> list[str]:
    if kind == "long":
        return [f"Mozilla/5.0 {round_}.{n} " + "x" * LONG_BYTES for n in range(views)]
    return [f"{BROWSER} {round_}.{n}" for n in range(views)]


def flush_seconds(app: Any, agents: list[str]) -> float:
    """Count one page view per agent (each its own address), then time the flush."""
    from app.stats import count_view
    from app.stats.aggregation import _machine_or_robot

    _machine_or_robot.cache_clear()  # every agent new to the flush, as the attack's are
    record_id = uuid.uuid4()
    for n, agent in enumerate(agents):
        environ = {"REMOTE_ADDR": f"10.{n // 65536 % 256}.{n // 256 % 256}.{n % 256}"}
        with app.test_request_context(
            f"/records/{record_id}", headers={"User-Agent": agent}, environ_base=environ
        ):
            count_view(record_id, 200)
    collector = app.extensions["stats"]
    start = time.perf_counter()
    taken = collector.flush()
    elapsed = time.perf_counter() - start
    assert taken == len(agents), (taken, len(agents))
    return elapsed


def whole_match_seconds() -> float:
    """The COUNTER lists matched against one whole 200 KB User-Agent (the old cost)."""
    from counter_robots import is_machine, is_robot

    agent = "Mozilla/5.0 " + "x" * LONG_BYTES
    is_machine("warm-up")
    start = time.perf_counter()
    is_machine(agent)
    is_robot(agent)
    return time.perf_counter() - start


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--views", type=int, default=200)
    parser.add_argument("--repetitions", type=int, default=5)
    args = parser.parse_args()

    from app import create_app

    with workspace("user-agents") as work:
        env = sqlite_env(work)
        prepare_database(env)
        app = create_app(
            {
                "SQLALCHEMY_DATABASE_URI": f"sqlite:///{work / 'db.sqlite3'}",
                "STORAGE_BACKEND": "local",
                "STORAGE_LOCAL_ROOT": str(work / "storage"),
                "STATS": "on",
                "STATS_BACKGROUND_FLUSH": False,
            }
        )
        logging.getLogger("app.access").setLevel(logging.WARNING)
        times: dict[str, list[float]] = {"short": [], "long": []}
        for round_ in range(args.repetitions):
            for kind in ("short", "long"):  # alternating, so drifting load hits both
                times[kind].append(flush_seconds(app, _agents(kind, args.views, round_)))
                log(f"round {round_ + 1}: {kind} {times[kind][-1] * 1000:.1f} ms")
        whole = whole_match_seconds()
    short, long = median(times["short"]), median(times["long"])
    ratio = long / short
    print_table(
        ["set", "views", "flush median (ms)", "per view (ms)"],
        [
            [
                "short (browser)",
                args.views,
                f"{short * 1000:.1f}",
                f"{short * 1000 / args.views:.3f}",
            ],
            ["long (200 KB)", args.views, f"{long * 1000:.1f}", f"{long * 1000 / args.views:.3f}"],
            [
                "long, whole UA matched (before)",
                args.views,
                f"{whole * args.views * 1000:.0f} (estimated)",
                f"{whole * 1000:.1f}",
            ],
        ],
    )
    verdict = "PASS" if ratio <= TARGET else "FAIL"
    print(f"long / short flush: {ratio:.2f} (target <= {TARGET}): {verdict}")


if __name__ == "__main__":
    main()
