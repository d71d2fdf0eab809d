"""The benchmarks of `make bench` (transfer, metadata, lists, search), one after the other.

    .venv/bin/python -m bench.all            # full size (quiet machine; about 15-25 minutes)
    .venv/bin/python -m bench.all --trial    # small sizes, a few minutes

Each runs in its own process; one that fails is reported and the others still run. Every
script prints a PASS/FAIL line per target and saves bench/results/<name>-latest.json, from
which BENCHMARKS.md is edited by hand. The exit status is 0 either way.
"""

from __future__ import annotations

import argparse
import subprocess
import time

from bench.common import PYTHON, ROOT, log

TRIAL = {
    "transfer": ["--big-mib", "20", "--small-mib", "1", "--slices", "16"],
    "metadata": ["--duration", "3"],
    "lists": ["--sizes", "1000,10000,100000", "--requests", "15", "--walk-pages", "20"],
    "search": ["--sizes", "2000,20000", "--requests", "10"],
}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--trial", action="store_true", help="small sizes")
    parser.add_argument("--only", default=",".join(TRIAL), help="comma-separated subset")
    args = parser.parse_args()
    began = time.monotonic()
    failed = []
    for name in args.only.split(","):
        options = TRIAL[name] if args.trial else []
        log(f"=== bench.{name} {' '.join(options)}")
        if subprocess.run([PYTHON, "-m", f"bench.{name}", *options], cwd=ROOT).returncode:
            failed.append(name)
    log(f"done in {(time.monotonic() - began) / 60:.1f} min; broken runs: {failed or 'none'}")


if __name__ == "__main__":
    main()
