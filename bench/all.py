"""Every benchmark, then the plots and BENCHMARKS.md, in one command.

    .venv/bin/python -m bench.all            # full size (quiet machine; about 15-25 minutes)
    .venv/bin/python -m bench.all --trial    # small sizes, a few minutes, marked as trial

Each benchmark runs in its own process; one that fails is reported and the others still run.
The exit status is 0 either way: the PASS/FAIL lines and BENCHMARKS.md carry the verdicts.
"""

from __future__ import annotations

import argparse
import subprocess
import time

from bench.common import PYTHON, ROOT, log

FULL = {
    "transfer": [],
    "metadata": [],
    "lists": [],
    "search": [],
}
TRIAL = {
    "transfer": ["--big-mib", "20", "--small-mib", "1", "--slices", "16"],
    "metadata": ["--duration", "3"],
    "lists": ["--sizes", "1000,10000,100000", "--requests", "15", "--walk-pages", "20"],
    "search": ["--sizes", "2000,20000", "--requests", "10"],
}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--trial", action="store_true", help="small sizes (marked as trial)")
    parser.add_argument(
        "--only", default="transfer,metadata,lists,search", help="comma-separated subset to run"
    )
    parser.add_argument("--no-report", action="store_true", help="leave BENCHMARKS.md alone")
    args = parser.parse_args()
    plan = TRIAL if args.trial else FULL
    began = time.monotonic()
    failed = []
    for name in args.only.split(","):
        log(f"=== bench.{name} {' '.join(plan[name])}")
        done = subprocess.run([PYTHON, "-m", f"bench.{name}", *plan[name]], cwd=ROOT)
        if done.returncode != 0:
            failed.append(name)
            log(f"bench.{name} stopped with status {done.returncode}")
    subprocess.run([PYTHON, "-m", "bench.plot", "--publish"], cwd=ROOT)
    if not args.no_report:
        subprocess.run([PYTHON, "-m", "bench.report"], cwd=ROOT)
    log(f"done in {(time.monotonic() - began) / 60:.1f} min; broken runs: {failed or 'none'}")


if __name__ == "__main__":
    main()
