"""`make mutate`: mutation testing of the rules a slip in which no user would notice at once.

mutmut (configured in pyproject.toml, `[tool.mutmut]`) copies the project into mutants/, makes
small changes ("mutants") to the functions in SCOPE one at a time and runs the tests that call
them. A mutant no test notices has survived: either a test is missing, or the change cannot
matter. The second kind is listed with its reason in docs/mutation.md; this script prints the
score and every survivor, saying which of them are accepted there and which are new.

Run from the project root: `python -m tests.support.mutation` (what `make mutate` does), or
with mutant name patterns to run part of SCOPE (`... app.files.pagination.*`).
"""

from __future__ import annotations

import fnmatch
import json
import os
import re
import resource
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

#: The functions mutated: who may see or change a record, the token check and what ends a
#: cached token, list filters, totals and page envelopes, and download ranges. Not the ways
#: PostgreSQL reads a path-filtered page (`_newest_per_folder`, `_all_matches`, and the
#: PostgreSQL branch of `_in_order`, marked `# pragma: no mutate`): they change how, not which,
#: records are read, and only the PostgreSQL stack reaches them (docs/mutation.md).
SCOPE = [
    # app/files/access.py: who may see a record and download its content
    "app.files.access.x_visible__*",
    "app.files.access.x_may_see__*",
    "app.files.access.x_embargo_active__*",
    "app.files.access.x_check_downloadable__*",
    "app.files.access.x_today__*",
    "app.files.access.x_read_record__*",
    "app.files.access.x_downloadable_record__*",
    "app.files.access.x_find_record__*",
    # app/files/listing.py: list filters and totals
    "app.files.listing.x__escape_like__*",
    "app.files.listing.x_filtered__*",
    "app.files.listing.xǁListingǁ*",
    "app.files.listing.x__folder_conditions__*",
    "app.files.listing.x_folders_of__*",
    "app.files.listing.x__in_order__*",
    "app.files.listing.x_before__*",
    "app.files.listing.x_paginate__*",
    "app.files.listing.x__owned_count__*",
    "app.files.listing.x_keyset_page__*",
    # app/files/pagination.py: page envelopes (total, last_page, from/to, page links)
    "app.files.pagination.x_url_with__*",
    "app.files.pagination.x_list_response__*",
    "app.files.pagination.x_page_envelope__*",
    "app.files.pagination.x_cursor_envelope__*",
    # app/files/downloads.py: ranges and conditional requests
    "app.files.downloads.x__range_applies__*",
    "app.files.downloads.x__bounds__*",
    "app.files.downloads.x_stored_file_response__*",
    "app.files.downloads.x_download_response__*",
    # app/auth/services.py: the token check and revocation
    "app.auth.services.x_resolve_token__*",
    "app.auth.services.x_revoke_token__*",
    # app/cache.py: what this process's own changes empty in its cache
    "app.cache.x__channels_of_flush__*",
    "app.cache.x__attrs__*",
    "app.cache.x__channels_of_statement__*",
    "app.cache.x__set_by__*",
    "app.cache.x__forget__*",
    "app.cache.x__note__*",
    "app.cache.x__noted_flush__*",
    "app.cache.x__noted_statement__*",
    "app.cache.x__settled__*",
]

#: The test files run, by name wherever they are under tests/ (they may move into folders):
#: those of the access rules, lists, downloads and tokens, on SQLite and local storage, and
#: the cache tests, which run on PostgreSQL. Search has its own tests and its own issue; its
#: lines in `filtered` and `Listing` are not mutated (docs/mutation.md).
TEST_FILES = {
    "test_records.py",
    "test_download.py",
    "test_list.py",
    "test_list_folders.py",
    "test_public.py",
    "test_tokens.py",
    "test_token_ids.py",
    "test_token_cache.py",
    "test_record_cache.py",
    # who a share link's holder may see (the holder's branch of `visible` and `may_see`)
    "test_links.py",
    "test_link_properties.py",
}

ACCEPTED = Path("docs/mutation.md")
DETECTED = {"killed", "timeout", "caught by type check"}


def mutmut(*args: str, capture: bool = False) -> subprocess.CompletedProcess[str]:
    command = [str(Path(sys.executable).with_name("mutmut")), *args]
    return subprocess.run(command, text=True, capture_output=capture, check=False)


def accepted_survivors() -> dict[str, str]:
    """Mutant name -> reason, from the table in docs/mutation.md."""
    if not ACCEPTED.exists():
        return {}
    rows = re.findall(r"^\| `([^`]+)` \| (.+?) \|$", ACCEPTED.read_text(), re.MULTILINE)
    return dict(rows)


def results(scope: list[str]) -> dict[str, str]:
    """Mutant name -> status, for the mutants in `scope`."""
    listed = mutmut("results", "--all", "true", capture=True).stdout
    statuses = dict(re.findall(r"^\s+(\S+): (.+)$", listed, re.MULTILINE))
    return {
        name: status
        for name, status in statuses.items()
        if any(fnmatch.fnmatch(name, pattern) for pattern in scope)
    }


def main(patterns: list[str]) -> int:
    scope = [p for p in SCOPE if any(fnmatch.fnmatch(p, q) or p.startswith(q) for q in patterns)]
    scope = scope if patterns else SCOPE
    if not scope:
        print(f"no function of SCOPE matches {patterns}", file=sys.stderr)
        return 2
    shutil.rmtree("mutants", ignore_errors=True)  # stale copies would be tested otherwise
    start = time.monotonic()
    with tempfile.TemporaryDirectory() as folder:
        # The tests run once per mutant: one migrated SQLite file serves all of the runs.
        from tests.conftest import migrate_database

        template = Path(folder) / "template.sqlite3"
        migrate_database(f"sqlite:///{template}", Path(folder))
        os.environ["TEST_SQLITE_TEMPLATE"] = str(template)
        run = mutmut("run", "--max-children", str(os.cpu_count() or 2), *scope)
    minutes = (time.monotonic() - start) / 60
    cpu = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu_minutes = (cpu.ru_utime + cpu.ru_stime) / 60
    statuses = results(scope)
    if run.returncode != 0 or not statuses:
        print(f"mutmut run failed (exit {run.returncode})", file=sys.stderr)
        return 1
    # A function that moved or was renamed would otherwise leave the score without a word.
    lost = [p for p in scope if not any(fnmatch.fnmatch(name, p) for name in statuses)]
    if lost:
        print(
            f"no mutants for {', '.join(lost)}: a function moved or was renamed; update SCOPE"
            " and COVERING here and only_mutate in pyproject.toml.",
            file=sys.stderr,
        )
        return 1

    accepted = accepted_survivors()
    detected = [name for name, status in statuses.items() if status in DETECTED]
    survivors = sorted(name for name, status in statuses.items() if status not in DETECTED)
    score = 100 * len(detected) / len(statuses)
    print()
    print(f"Mutation score: {score:.1f} % ({len(detected)} of {len(statuses)} mutants detected)")
    # Wall time depends on what else the machine runs; the CPU time of the runs does not.
    print(
        f"Run time: {minutes:.1f} min; CPU time of the test runs {cpu_minutes:.1f} min "
        f"on {os.cpu_count()} cores (load average now {os.getloadavg()[0]:.1f})"
    )
    new = [name for name in survivors if name not in accepted]
    for name in survivors:
        mark = "accepted" if name in accepted else "NEW"
        print(f"\n[{mark}] {name} ({statuses[name]})")
        if name in accepted:
            print(f"    {accepted[name]}")
        else:
            print(mutmut("show", name, capture=True).stdout.rstrip())
    if new:
        print(f"\n{len(new)} survivor(s) not accepted in {ACCEPTED}: write a test, or say why")
        print("the change cannot matter.")
    return 1 if new else 0


# --- pytest plugin: loaded in mutmut's runs only (`-p tests.support.mutation` in pyproject) ---


def pytest_ignore_collect(collection_path: Path, config: object) -> bool | None:
    """Of the tests/ folder mutmut is given, only the files of TEST_FILES."""
    name = collection_path.name
    if collection_path.suffix == ".py" and name.startswith("test_") and name not in TEST_FILES:
        return True
    return None


#: The test files whose subject a function is (the first matching prefix of its mutants' names):
#: a mutant runs only those of them that call it (mutmut found which do). The other files reach
#: it on the way (every test signs in, most list), which a surviving mutant would pay for with
#: all of their tests, for nothing; PostgreSQL tests (a database each) only where the cache is
#: what is tested.
SQLITE_ACCESS = {"test_records.py", "test_download.py", "test_list.py", "test_public.py"}
LISTS = {"test_list.py", "test_list_folders.py", "test_public.py"}
LINKS = {"test_links.py", "test_link_properties.py"}
COVERING = {
    "app.files.access.x_may_see_": SQLITE_ACCESS | LINKS,
    "app.files.access.x_visible_": SQLITE_ACCESS | LINKS,
    "app.files.access.x_read_record_": SQLITE_ACCESS | {"test_record_cache.py"},
    "app.files.access.x_downloadable_record_": {"test_download.py", "test_record_cache.py"},
    "app.files.access.": SQLITE_ACCESS,
    "app.files.listing.": LISTS,
    "app.files.pagination.": LISTS,
    "app.files.downloads.x_download_response_": {"test_download.py", "test_record_cache.py"},
    "app.files.downloads.": {"test_download.py"},
    "app.auth.services.x_resolve_token_": {
        "test_tokens.py",
        "test_token_ids.py",
        "test_token_cache.py",
        "test_records.py",
        "test_links.py",  # a link's `created_by` is the caller's email
    },
    "app.auth.services.": {
        "test_tokens.py",
        "test_token_ids.py",
        "test_token_cache.py",
        "test_records.py",
    },
    "app.cache.": {"test_token_cache.py", "test_record_cache.py"},
}


def pytest_collection_modifyitems(session: Any, config: Any, items: list[Any]) -> None:
    """For a mutant, the tests of its module (COVERING), cheapest first: its run stops at the
    first failing test (`-x`). SQLite tests before the PostgreSQL ones (a database each), then
    by the time mutmut measured."""
    mutant = os.environ.get("MUTANT_UNDER_TEST", "")
    files = next((f for prefix, f in COVERING.items() if mutant.startswith(prefix)), None)
    if files is not None:
        kept = [item for item in items if item.path.name in files]
        config.hook.pytest_deselected(items=[item for item in items if item.path.name not in files])
        items[:] = kept
    durations: dict[str, float] = {}
    stats = Path("mutmut-stats.json")  # the run's folder is mutants/
    if stats.exists():
        durations = json.loads(stats.read_text()).get("duration_by_test", {})
    items.sort(
        key=lambda item: (
            item.get_closest_marker("postgres") is not None,
            durations.get(item.nodeid, 0.0),
        )
    )


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
