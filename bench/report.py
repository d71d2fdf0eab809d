"""Write BENCHMARKS.md (and docs/benchmarks/list-plans.md) from the latest results
(bench/results/*-latest.json).

The file opens with one table of the current targets. Kept from the existing file: the text
between ``<!-- notes:begin -->`` and ``<!-- notes:end -->`` (the hand-written verdicts), and
the rows and sections of benchmarks without results here (results are not committed; the
rows of the benchmarks outside `make bench` are written by hand). The rest is generated.

    .venv/bin/python -m bench.report
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

from bench.common import ROOT, MiB
from bench.plot import is_trial, load

TARGET = ROOT / "BENCHMARKS.md"
PLANS = ROOT / "docs" / "benchmarks" / "list-plans.md"
TARGETS_HEADING = "## Current targets"
#: The order of the table's rows; a benchmark not named here comes after these.
ORDER = ("transfer", "metadata", "lists", "search", "resumable", "open_internet", "ablation")
NOTES_BEGIN, NOTES_END = "<!-- notes:begin -->", "<!-- notes:end -->"
DEFAULT_NOTES = "(no notes yet)"


def _num(value: Any, digits: int = 1) -> str:
    if value is None:
        return "–"
    if isinstance(value, float):
        if value != value:  # NaN
            return "–"
        if abs(value) < 10 and digits == 1:
            return f"{value:.2f}"
        return f"{value:,.{digits}f}"
    if isinstance(value, int):
        return f"{value:,}"
    return str(value)


def _table(headers: list[str], rows: list[list[Any]]) -> str:
    lines = ["| " + " | ".join(headers) + " |", "|" + "---|" * len(headers)]
    lines += ["| " + " | ".join(_num(v) for v in row) + " |" for row in rows]
    return "\n".join(lines)


def _verdict(ok: bool) -> str:
    return "**PASS**" if ok else "**FAIL**"


def _short_sql(sql: str) -> str:
    """The statement with its long column list folded."""
    sql = re.sub(
        r"SELECT (file_records\.\w+(?: AS \w+)?, )+file_records\.\w+(?: AS \w+)?",
        "SELECT file_records.<all 22 columns>",
        sql,
    )
    return re.sub(r"\s*\n\s*", " ", sql).strip()


def machine_section(documents: list[dict[str, Any]], kept: dict[str, Any] | None = None) -> str:
    machine = documents[0]["machine"]
    pg = machine["postgresql"]
    disk = machine["disk"]
    packages = ", ".join(f"{k} {v}" for k, v in machine["packages"].items())
    rows = [
        ["CPU", f"{machine['cpu']}, nproc {machine['nproc']}"],
        ["Memory", f"{machine['memory_gib']} GiB"],
        [
            "Disk",
            f"{disk['device']} ({disk['filesystem']}), {disk['size_gib']} GiB, "
            f"{disk['free_gib']} GiB free, rotational flag {disk['rotational_flag']}",
        ],
        ["OS", f"{machine['os']}, kernel {machine['kernel']}"],
        ["Python", f"{machine['python']}; {packages}"],
        ["SeaweedFS", machine["seaweedfs"]],
        [
            "PostgreSQL",
            f"{pg.get('version', '?').split(' on ')[0]}; "
            + ", ".join(
                f"{name} {pg.get(name)}"
                for name in (
                    "shared_buffers",
                    "work_mem",
                    "effective_cache_size",
                    "max_parallel_workers_per_gather",
                    "random_page_cost",
                    "jit",
                )
            )
            + " (server defaults, not tuned)",
        ],
        ["curl", " ".join(machine["curl"].split()[:2])],
        ["wrk", machine["wrk"]],
        ["App revision", machine["git"]],
    ]
    kept = kept or {}
    revisions: dict[str, list[str]] = {}
    for document in documents:
        revisions.setdefault(document["machine"]["git"], []).append(document["name"])
    if len(revisions) > 1 or kept.get("sections"):
        rows[-1][1] = "; ".join(f"{rev} ({', '.join(names)})" for rev, names in revisions.items())
    loads = "; ".join(
        [
            f"{d['name']} {', '.join(f'{x:.2f}' for x in d['machine']['load_average_at_start'])}"
            for d in documents
        ]
        + kept.get("loads", [])
    )
    rows.append(["Load average at start", loads])
    return _table(["", ""], rows)


def _run(document: dict[str, Any]) -> str:
    started = document["started"][:16].replace("T", " ")
    trial = ", **trial sizes**" if is_trial(document) else ""
    return f"`{document['command']}` ({started} UTC, {document['machine']['git']}{trial})"


def targets_section(documents: list[dict[str, Any]], kept_rows: dict[str, list[str]]) -> str:
    """One row per target: what is required, the figure, the verdict, the run behind it."""
    rows = dict(kept_rows)
    for document in documents:
        rows[document["name"]] = [
            "| "
            + " | ".join(
                [
                    document["name"],
                    check["target"],
                    f"{check['op']} {check['limit']}{check['unit']}",
                    f"{check['value']:.3f}{check['unit']}",
                    _verdict(check["pass"]),
                    _run(document),
                ]
            )
            + " |"
            for check in document["checks"]
        ]
    names = [n for n in ORDER if n in rows] + [n for n in rows if n not in ORDER]
    return "\n".join(
        [
            "| benchmark | target | required | figure | verdict | command (run, revision) |",
            "|---|---|---|---|---|---|",
            *(row for name in names for row in rows[name]),
        ]
    )


def transfer_section(document: dict[str, Any]) -> str:
    data = document["data"]
    params = document["params"]
    parts = [
        "![Transfer throughput, service vs baseline](docs/benchmarks/transfer.png)",
        "",
        f"Files: 1 x {params['big_mib']} MiB and {params['small_count']} x "
        f"{params['small_mib']} MiB (MP4 around random bytes), {params['reps']} repetitions "
        f"after {params.get('warmup', 0)} warm-up run(s), variants alternating; medians. "
        "S3 transfers are measured against the bare forwarder of `bench/bare.py --s3` (the "
        "target, issue 12) and direct S3 (boto3 `upload_file`, curl on a presigned URL) in the "
        "same run; the ratios to direct S3 are for information.",
        "",
        _table(
            [
                "scenario",
                "baseline",
                "baseline MiB/s",
                "service MiB/s",
                "ratio",
                "target",
                "",
                "direct S3 MiB/s",
                "service/direct",
                "forwarder/direct",
            ],
            [
                [
                    s["label"],
                    s["baseline"],
                    s["baseline_mib_s"],
                    s["service_mib_s"],
                    f"{s['ratio']:.3f}",
                    f">= {s['target']}",
                    _verdict(s["ratio"] >= s["target"]),
                    s.get("reference_mib_s"),
                    f"{s['ratio_to_reference']:.3f}" if "reference" in s else None,
                    f"{s['baseline_to_reference']:.3f}" if "reference" in s else None,
                ]
                for s in data["summary"]
            ],
        ),
        "",
        "Every run (MiB/s):",
        "",
        _table(
            ["scenario", "baseline runs", "service runs", "direct S3 runs"],
            [
                [
                    s["label"],
                    ", ".join(f"{v:.1f}" for v in s["baseline_runs_mib_s"]),
                    ", ".join(f"{v:.1f}" for v in s["service_runs_mib_s"]),
                    ", ".join(f"{v:.1f}" for v in s.get("reference_runs_mib_s", [])) or None,
                ]
                for s in data["summary"]
            ],
        ),
        "",
        "Where an upload's time goes (median over the repetitions): waitress reads the whole "
        "request body into a temporary file before the app is called; *before app* is curl's "
        "total minus the app's `duration_ms`.",
        "",
    ]
    rows = []
    for key, runs in data["runs"].items():
        service = runs.get("service POST /api/files")
        if not service or "app_seconds" not in service[0]:
            continue
        med = lambda name, rs=service: sorted(r[name] for r in rs)[len(rs) // 2]  # noqa: E731
        rows.append(
            [
                key,
                med("seconds"),
                med("receive_seconds"),
                med("app_seconds"),
                max(r["temp_peak"].get("spool", 0) for r in service) / MiB,
                max(r["temp_peak"].get("storage_tmp", 0) for r in service) / MiB,
            ]
        )
    parts.append(
        _table(
            [
                "upload",
                "total s",
                "before app s",
                "in app s",
                "waitress spool peak MiB",
                "storage .tmp peak MiB",
            ],
            rows,
        )
    )
    if data.get("temp_disk"):
        parts += [
            "",
            "Temporary disk of one upload (peak of the server's open temporary files, sampled "
            "every 20 ms from /proc/PID/fd): the waitress spool is the one copy of the request; "
            "the local backend's `.tmp` file is the stored object being written (renamed into "
            "place on commit), not a second temporary copy.",
            "",
            _table(
                ["upload", "request bytes", "spool copies (max)", "storage .tmp peak MiB"],
                [
                    [
                        label,
                        t["request_bytes"],
                        f"{t['spool_copies_max']:.3f}",
                        t["storage_tmp_peak_bytes"] / MiB,
                    ]
                    for label, t in data["temp_disk"].items()
                ],
            ),
        ]
    if data.get("memory"):
        parts += [
            "",
            f"Memory: a freshly started and warmed-up server; then at once: upload "
            f"{params['small_count']} x {params['small_mib']} MiB, upload 1 x "
            f"{params['big_mib']} MiB, download 1 x {params['big_mib']} MiB. Peak is the larger "
            "of VmHWM (reset with `clear_refs` after the idle reading) and VmRSS sampled every "
            "10 ms.",
            "",
            _table(
                [
                    "repetition",
                    "idle RSS MiB",
                    "peak RSS MiB",
                    "growth MiB",
                    "spool peak MiB",
                    "wall s",
                ],
                [
                    [
                        i + 1,
                        r["idle_rss"] / MiB,
                        r["peak_rss"] / MiB,
                        r["growth"] / MiB,
                        r["temp_peak"].get("spool", 0) / MiB,
                        r["wall_seconds"],
                    ]
                    for i, r in enumerate(data["memory"])
                ],
            ),
        ]
    if data.get("informational"):
        parts += [
            "",
            "For information, no target: the ratios to direct S3 and to the forwarder that "
            "reads with `get_object`.",
            "",
            _table(
                ["ratio", "measured"],
                [[i["target"], f"{i['value']:.3f}{i['unit']}"] for i in data["informational"]],
            ),
        ]
    return "\n".join(parts)


def metadata_section(document: dict[str, Any]) -> str:
    data = document["data"]
    params = document["params"]
    rows = []
    for name, runs in data["runs"].items():
        rows.append(
            [
                name,
                ", ".join(f"{r['rps']:.0f}" for r in runs),
                data["median_rps"][name],
                sorted(r["p50_ms"] for r in runs)[len(runs) // 2],
                sorted(r["p99_ms"] for r in runs)[len(runs) // 2],
                sorted(r.get("server_ms_median", float("nan")) for r in runs)[len(runs) // 2],
            ]
        )
    writes = data["writes_during_authenticated_load"] or "none"
    return "\n".join(
        [
            f"`wrk -t{params['wrk_threads']} -c{params['connections']} -d{params['duration']}s "
            f"--latency`, {params['reps']} runs per endpoint, endpoints alternating.",
            "",
            _table(
                ["endpoint", "runs req/s", "median req/s", "p50 ms", "p99 ms", "in app ms"],
                rows,
            ),
            "",
            f"- `GET /api/files/{{id}}` / `/healthz`: **{data['ratio_to_healthz']:.3f}** "
            "(target >= 0.5; both on the same `flask serve`).",
            f"- `GET /api/files/{{id}}` / framework-free `/json` under the same waitress "
            f"settings: {data['ratio_to_bare_json']:.3f} (for reference).",
            f"- Row writes (`pg_stat_user_tables` n_tup_ins + n_tup_upd + n_tup_del, all "
            f"tables) during {data['authenticated_requests']:,} authenticated requests: "
            f"{writes}; token rows whose xmin or last_used_at changed: "
            f"{data.get('token_rows_updated') or 'none'}. The probe (first use of a new token) "
            f"saw {data['probe_writes'] or 'none'}, which shows the measurement sees a write.",
        ]
    )


def _growth(first: dict[str, Any], last: dict[str, Any], kind: str) -> str:
    return (
        f"{last['lists'][kind]['median_server_ms'] / first['lists'][kind]['median_server_ms']:.2f}x"
    )


def _split(level: dict[str, Any], kind: str) -> str:
    plans = level["plans"].get(kind, [])
    count = [p["execution_ms"] for p in plans if "count(" in p["sql"].lower()]
    page = [p["execution_ms"] for p in plans if "count(" not in p["sql"].lower()]
    return f"{_num(sum(count) if count else None)} / {_num(sum(page) if page else None)}"


def lists_section(document: dict[str, Any]) -> str:
    data = document["data"]
    params = document["params"]
    levels = sorted(data["levels"].values(), key=lambda level: level["records"])
    sizes = [level["records"] for level in levels]
    kinds = list(levels[0]["lists"])
    first, last = levels[0], levels[-1]
    parts = [
        "![List latency against record count](docs/benchmarks/lists.png)",
        "",
        f"Median server time (`duration_ms` of the access log) of {params['requests']} requests "
        f"per list and size after {params['warmup']} warm-up rounds, lists interleaved; "
        f"{params['users']:,} users; first page (100 records) unless noted.",
        "",
        _table(
            ["list", *[f"{s:,} records" for s in sizes], "growth"],
            [
                [
                    kind,
                    *[level["lists"][kind]["median_server_ms"] for level in levels],
                    _growth(first, last, kind),
                ]
                for kind in kinds
            ],
        ),
        "",
        "Where the server time goes: execution time of each statement under `EXPLAIN "
        "ANALYZE` (custom plan), the exact `count(*)` behind `total` and the page itself:",
        "",
        _table(
            ["list", *[f"{s:,}: count / page ms" for s in sizes]],
            [[kind, *[_split(level, kind) for level in levels]] for kind in kinds],
        ),
        "",
        "Client time (keep-alive loopback, Python http.client) and `total` of the envelope:",
        "",
        _table(
            ["list", *[f"{s:,}" for s in sizes]],
            [
                [
                    kind,
                    *[
                        f"{level['lists'][kind]['median_client_ms']:.1f} ms, "
                        f"total {level['lists'][kind]['total']:,}"
                        for level in levels
                    ],
                ]
                for kind in kinds
            ],
        ),
        "",
        "Seeding (COPY, index rebuild, VACUUM ANALYZE) and table size:",
        "",
        _table(
            [
                "records",
                "seconds to grow to it",
                "phases",
                "heap MiB",
                "with indexes MiB",
                "heaviest user",
            ],
            [
                [
                    level["records"],
                    level["seed_seconds"],
                    ", ".join(f"{k} {v:.1f} s" for k, v in level["seed_timings"].items()),
                    level["table"]["heap_bytes"] / MiB,
                    level["table"]["total_bytes_with_indexes"] / MiB,
                    level["heaviest_user_records"],
                ]
                for level in levels
            ],
        ),
        "",
    ]
    parts += [
        "Keyset pages (`cursor` / `next_cursor`), server time over every walked page:",
        "",
        _table(
            ["list", "records", "pages walked", "median ms", "p95 ms", "max ms", "problems"],
            [
                [
                    kind,
                    level["records"],
                    w["pages"],
                    w["median_ms"],
                    w["p95_ms"],
                    w["max_ms"],
                    "; ".join(w["problems"]) or "none",
                ]
                for level in levels
                for kind, w in level["keyset"].items()
            ],
        ),
        "",
    ]
    parts.append(
        f"The plans of every statement at {last['records']:,} records: "
        "[docs/benchmarks/list-plans.md](docs/benchmarks/list-plans.md)."
    )
    return "\n".join(parts)


def plans_document(document: dict[str, Any]) -> str:
    """docs/benchmarks/list-plans.md: the plans of the lists at the largest size."""
    last = max(document["data"]["levels"].values(), key=lambda level: level["records"])
    parts = [
        f"# List plans at {last['records']:,} records",
        "",
        "<!-- Generated by `python -m bench.report` with BENCHMARKS.md. -->",
        "",
        f"{_started(document)}",
        "The statements are the app's own, caught in-process (SQLAlchemy "
        "`before_cursor_execute`) while the same requests were replayed, then run under "
        "`EXPLAIN (ANALYZE, BUFFERS)` with their parameters. The generic plan (under "
        "*details*) is what a prepared statement may switch to: psycopg prepares a statement "
        "after 5 executions on a connection and PostgreSQL may then stop planning per value.",
        "",
    ]
    for label, plans in last["plans"].items():
        parts.append(f"## {label}")
        parts.append("")
        for plan in plans:
            role = "count" if "count(" in plan["sql"].lower() else "page"
            parts += [
                f"{role}: execution {plan['execution_ms']} ms, index used: "
                f"{'yes' if plan['uses_index'] else '**no**'}; generic plan "
                f"{plan['generic_execution_ms']} ms, index used: "
                f"{'yes' if plan['generic_uses_index'] else '**no**'}",
                "",
                "```sql",
                _short_sql(plan["sql"]),
                f"-- {plan['params']}",
                "```",
                "",
                "```",
                plan["plan"],
                "```",
                "",
                "<details><summary>generic plan</summary>",
                "",
                "```",
                plan["generic_plan"],
                "```",
                "",
                "</details>",
                "",
            ]
    return "\n".join(parts).rstrip() + "\n"


#: The generated section of each benchmark, by the heading it starts with.
SECTION_HEADINGS = {
    "transfer": "## Transfers (items 2-4)",
    "metadata": "## Metadata requests (item 5)",
    "lists": "## Lists at scale (item 6)",
    "search": "## Search and harvesting (issue 13)",
}


def _kept(names: list[str], loaded: set[str]) -> dict[str, Any]:
    """What the existing BENCHMARKS.md shows for benchmarks without results in this checkout
    (results are not committed): their rows of the targets table, load averages and
    sections, kept verbatim so that regenerating after one benchmark drops no other figure."""
    kept: dict[str, Any] = {"rows": {}, "loads": [], "sections": {}}
    if not TARGET.exists():
        return kept
    text = TARGET.read_text()
    before, _, rest = text.partition(NOTES_BEGIN)
    outside = before + rest.partition(NOTES_END)[2] if rest else text
    begin = outside.find(f"\n{TARGETS_HEADING}\n")
    end = outside.find("\n## ", begin + 1)
    for line in outside[begin:end].splitlines() if begin >= 0 else []:
        name = line[2:].split(" | ", 1)[0]
        if line.startswith("| ") and name != "benchmark" and name not in loaded:
            kept["rows"].setdefault(name, []).append(line)
    loads = re.search(r"^\| Load average at start \| (.*) \|$", outside, re.M)
    for name in names:
        if loads:
            kept["loads"] += [
                item for item in loads.group(1).split("; ") if item.split(" ")[0] == name
            ]
        heading = SECTION_HEADINGS[name]
        begin = outside.find(f"\n{heading}\n")
        if begin >= 0:
            end = outside.find("\n## ", begin + 1)
            kept["sections"][name] = outside[begin + 1 : end if end >= 0 else None].strip("\n")
    return kept


def _notes() -> str:
    if TARGET.exists():
        text = TARGET.read_text()
        if NOTES_BEGIN in text and NOTES_END in text:
            return text.split(NOTES_BEGIN, 1)[1].split(NOTES_END, 1)[0].strip("\n")
    return DEFAULT_NOTES


def build() -> str:
    names = ("transfer", "metadata", "lists", "search")
    documents = [d for d in map(load, names) if d]
    if not documents:
        raise SystemExit("no results in bench/results: run a benchmark first")
    loaded = {d["name"] for d in documents}
    kept = _kept([n for n in names if n not in loaded], loaded)
    trial = [d["name"] for d in documents if is_trial(d)]
    status = (
        f"**TRIAL NUMBERS** for {', '.join(trial)}: small sizes on a shared machine, to show "
        "the harness works and where the time goes. The full-size run replaces them."
        if trial
        else "Full-size run."
    )
    if kept["sections"]:
        status += (
            f" The sections of {', '.join(kept['sections'])} are kept from the previous version "
            "of this file (no results of theirs in bench/results); their run lines give date "
            "and command."
        )
    parts = [
        "# Benchmarks",
        "",
        "<!-- Generated by `python -m bench.report` from bench/results/*-latest.json. Kept as "
        "they are: the notes, and the rows and sections of benchmarks without results there "
        "(the rows of resumable, open_internet and ablation are written by hand). -->",
        "",
        "`make bench` (`.venv/bin/python -m bench.all`) runs transfer, metadata, lists and "
        "search, each against baselines measured in the same run (it starts SeaweedFS, "
        "PostgreSQL databases and the app under waitress by itself; about 20 minutes on a quiet "
        "2-core machine), then writes the plots and this file. resumable, open_internet and "
        "ablation run on their own, with the commands in the table. What each script measures: "
        "[bench/README.md](bench/README.md); earlier rounds and the experiments behind the "
        "decisions: [docs/benchmarks/history.md](docs/benchmarks/history.md).",
        "",
        status,
        "",
        TARGETS_HEADING,
        "",
        targets_section(documents, kept["rows"]),
        "",
        "## Notes",
        "",
        NOTES_BEGIN,
        _notes(),
        NOTES_END,
        "",
        "## Machine",
        "",
        machine_section(documents, kept),
        "",
    ]
    by_name = {d["name"]: d for d in documents}
    if "transfer" in by_name:
        parts += [
            "## Transfers (items 2-4)",
            "",
            _started(by_name["transfer"]),
            transfer_section(by_name["transfer"]),
            "",
        ]
    if "metadata" in by_name:
        parts += [
            "## Metadata requests (item 5)",
            "",
            _started(by_name["metadata"]),
            metadata_section(by_name["metadata"]),
            "",
        ]
    if "lists" in by_name:
        parts += [
            "## Lists at scale (item 6)",
            "",
            _started(by_name["lists"]),
            lists_section(by_name["lists"]),
        ]
    if "search" in by_name:
        from bench.search import section as search_section

        parts += [
            "",
            "## Search and harvesting (issue 13)",
            "",
            _started(by_name["search"]),
            search_section(by_name["search"]),
        ]
    text = "\n".join(parts).rstrip() + "\n"
    for name, section in kept["sections"].items():
        # In the order of SECTION_HEADINGS: before the first later section that is present.
        later = [
            SECTION_HEADINGS[n]
            for n in list(SECTION_HEADINGS)[list(SECTION_HEADINGS).index(name) + 1 :]
            if f"\n{SECTION_HEADINGS[n]}\n" in text
        ]
        if later:
            at = text.index(f"\n{later[0]}\n") + 1
            text = text[:at] + section + "\n\n" + text[at:]
        else:
            text = text.rstrip() + "\n\n" + section + "\n"
    return text


def _started(document: dict[str, Any]) -> str:
    trial = " **(trial sizes)**" if is_trial(document) else ""
    return f"Run {document['started']}{trial}: `{document['command']}`\n"


def main() -> None:
    TARGET.write_text(build())
    print(f"wrote {Path(TARGET).relative_to(ROOT)}")
    lists = load("lists")
    if lists:
        PLANS.write_text(plans_document(lists))
        print(f"wrote {PLANS.relative_to(ROOT)}")


if __name__ == "__main__":
    main()
