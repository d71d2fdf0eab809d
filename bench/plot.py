"""Plots of the latest results: list latency against records, transfer throughput.

Reads ``bench/results/{lists,transfer}-latest.json`` and writes ``bench/results/*.png``;
``--publish`` also copies them to ``docs/benchmarks/`` (the copies BENCHMARKS.md links).

    .venv/bin/python -m bench.plot --publish
"""

from __future__ import annotations

import argparse
import json
import shutil
from pathlib import Path
from typing import Any

from bench.common import RESULTS, ROOT, log

DOCS = ROOT / "docs" / "benchmarks"
LIST_LABELS = {
    "admin_all": "admin, all records (target 50 ms)",
    "admin_path_freigabe": "admin, path prefix + freigabe (target 50 ms)",
    "public": "public list (target 50 ms)",
    "user_own": "user's own list (target 15 ms)",
    "admin_all_deep": "admin, page halfway (OFFSET)",
}


def load(name: str) -> dict[str, Any] | None:
    path = RESULTS / f"{name}-latest.json"
    return json.loads(path.read_text()) if path.exists() else None


def is_trial(document: dict[str, Any]) -> bool:
    params = document["params"]
    if document["name"] == "transfer":
        return (params["big_mib"], params["small_mib"], params["small_count"]) != (200, 8, 25)
    if document["name"] in ("lists", "search"):
        return max(int(s) for s in str(params["sizes"]).split(",")) < 1_000_000
    if document["name"] == "metadata":
        return params["duration"] < 10
    return False


def _subtitle(document: dict[str, Any]) -> str:
    machine = document["machine"]
    trial = "TRIAL (small sizes) - " if is_trial(document) else ""
    params = document["params"]
    if document["name"] == "lists":
        runs = f"median of {params['requests']} requests per point"
    else:
        runs = f"median of {params['reps']} runs"
    return (
        f"{trial}{document['started'][:10]}, {machine['nproc']} CPUs, "
        f"{machine['memory_gib']} GiB, {runs}"
    )


def _count(value: float, _pos: object = None) -> str:
    if value >= 1_000_000:
        return f"{value / 1_000_000:g}M"
    if value >= 1000:
        return f"{value / 1000:g}k"
    return f"{value:g}"


def plot_lists(document: dict[str, Any], out: Path) -> Path:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from matplotlib.ticker import FuncFormatter, NullFormatter

    levels = sorted(document["data"]["levels"].values(), key=lambda level: level["records"])
    sizes = [level["records"] for level in levels]
    fig, ax = plt.subplots(figsize=(8, 5), dpi=100)
    for kind, label in LIST_LABELS.items():
        values = [level["lists"][kind]["median_server_ms"] for level in levels]
        style = ":" if kind == "admin_all_deep" else "-"
        ax.plot(sizes, values, style, marker="o", label=label)
    keyset_kinds = {kind for level in levels for kind in level.get("keyset", {})}
    for kind in sorted(keyset_kinds):
        values = [level["keyset"].get(kind, {}).get("p95_ms") for level in levels]
        ax.plot(sizes, values, "--", marker="s", label=f"keyset {kind}, p95 of all walked pages")
    ax.axhline(50, color="red", linewidth=0.8, linestyle="--", label="50 ms")
    ax.axhline(15, color="orange", linewidth=0.8, linestyle="--", label="15 ms")
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xticks(sizes)
    ax.xaxis.set_major_formatter(FuncFormatter(_count))
    ax.xaxis.set_minor_formatter(NullFormatter())
    ax.yaxis.set_major_formatter(FuncFormatter(lambda v, _pos: f"{v:g}"))
    ax.yaxis.set_minor_formatter(FuncFormatter(lambda v, _pos: f"{v:g}"))
    ax.tick_params(axis="y", which="minor", labelsize=7)
    ax.set_xlabel("records in file_records")
    ax.set_ylabel("median server time per request (ms)")
    ax.set_title("List latency against record count\n" + _subtitle(document), fontsize=10)
    ax.grid(True, which="both", alpha=0.3)
    ax.legend(fontsize=7, loc="upper left")
    fig.tight_layout()
    path = out / "lists.png"
    fig.savefig(path)
    plt.close(fig)
    return path


def plot_transfer(document: dict[str, Any], out: Path) -> Path:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    summary = document["data"]["summary"]
    labels = [s["label"] for s in summary]
    x = range(len(summary))
    width = 0.38
    fig, ax = plt.subplots(figsize=(10, 5.5), dpi=100)
    ax.bar(
        [i - width / 2 for i in x], [s["baseline_mib_s"] for s in summary], width, label="baseline"
    )
    bars = ax.bar(
        [i + width / 2 for i in x], [s["service_mib_s"] for s in summary], width, label="service"
    )
    for bar, s in zip(bars, summary, strict=True):
        verdict = "ok" if s["ratio"] >= s["target"] else "below"
        ax.annotate(
            f"{s['ratio']:.2f}\n(>= {s['target']}, {verdict})",
            (bar.get_x() + bar.get_width() / 2, bar.get_height()),
            ha="center",
            va="bottom",
            fontsize=7,
        )
    ax.set_xticks(list(x))
    ax.set_xticklabels(
        [f"{label}\nvs {s['baseline']}" for label, s in zip(labels, summary, strict=True)],
        rotation=25,
        ha="right",
        fontsize=7,
    )
    ax.set_ylabel("throughput (MiB/s, median)")
    ax.set_title("Transfer throughput: service vs baseline\n" + _subtitle(document), fontsize=10)
    ax.legend()
    ax.grid(True, axis="y", alpha=0.3)
    fig.tight_layout()
    path = out / "transfer.png"
    fig.savefig(path)
    plt.close(fig)
    return path


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--publish", action="store_true", help="copy the PNGs to docs/benchmarks")
    args = parser.parse_args()
    RESULTS.mkdir(parents=True, exist_ok=True)
    made = []
    lists = load("lists")
    if lists:
        made.append(plot_lists(lists, RESULTS))
    transfer = load("transfer")
    if transfer:
        made.append(plot_transfer(transfer, RESULTS))
    for path in made:
        log(f"plot: {path.relative_to(ROOT)}")
        if args.publish:
            DOCS.mkdir(parents=True, exist_ok=True)
            shutil.copyfile(path, DOCS / path.name)
            log(f"published: {(DOCS / path.name).relative_to(ROOT)}")


if __name__ == "__main__":
    main()
