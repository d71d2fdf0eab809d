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

import contextlib
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

import pytest

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
    # --- issue 37: the rules added with share links, the audit trail and the statistics ---
    # app/files/access.py: what a link names (a record, or a folder and below it)
    "app.files.access.x__in_folder__*",
    "app.files.access.x__named_by__*",
    "app.files.access.x__is_named_by__*",
    "app.files.access.x_downloadable__*",
    # app/links: which secret opens which link, its state and expiry, who may list and revoke
    # it, and the holder's headers (the rate limit's lambda is module-level: not mutated)
    "app.links.services.x_state__*",
    "app.links.services.x_check_expiry__*",
    "app.links.services.x_create_link__*",
    "app.links.services.x_links_of_record__*",
    "app.links.services.x_links_of__*",
    "app.links.services.x_revoke__*",
    "app.links.services.x_resolve__*",
    "app.links.services.x_note_use__*",
    "app.links.holder.x_is_holder_page__*",
    "app.links.holder.x_with_holder_headers__*",
    "app.links.holder.x_open_link__*",
    # app/audit: what `flask audit verify` accepts, and what prune removes and records
    # (the click commands themselves are decorated, which mutmut leaves alone)
    "app.audit.trail.x_canonical__*",
    "app.audit.trail.x_entry_hash__*",
    "app.audit.trail.x_bounded__*",
    "app.audit.services.x__entries__*",
    "app.audit.services.x__pruned__*",
    "app.audit.services.x__prune_fits__*",
    "app.audit.services.x_anchor_of__*",
    "app.audit.services.x_verify__*",
    "app.audit.services.x__against_anchor__*",
    "app.audit.services.x_prune__*",
    "app.audit.cli.x__taken__*",
    "app.audit.cli.x__anchor__*",
    # app/stats: which requests count (robots dropped, machines apart, double clicks once,
    # page views apart, only the counted statuses of GET at the known doors)
    "app.stats.aggregation.x__write__*",
    "app.stats.aggregation.x__agent_kind__*",
    "app.stats.aggregation.x__visitor__*",
    "app.stats.aggregation.x__new_visitors__*",
    "app.stats.collector.x_count_download__*",
    "app.stats.collector.x_count_view__*",
    "app.stats.collector.x__count__*",
    # issue 36: a folder ZIP's members counted as their bytes are handed on, the visitor of
    # the request, and the public figures of a record (not `pages.routes._reach_of`: it runs
    # once, when app/pages/routes.py is imported, in mutmut's fork server before any mutant is
    # chosen, so its mutants could never be seen; its rule is `human`, mutated here)
    "app.stats.collector.x_deferred_counter__*",
    "app.stats.collector.x__visitor_of_request__*",
    "app.stats.queries.x_record_totals__*",
    "app.stats.queries.x_human__*",
    "app.stats.queries.xǁCountsǁadd__*",
    # --- issue 38: the release-approval rule (four eyes): who may approve, what an approval
    # releases, and which changes of a record cancel its request or are refused ---
    "app.releases.services.x_four_eyes_objection__*",
    "app.releases.services.x_is_approver__*",
    "app.releases.services.x_approve__*",
    "app.releases.services.x_content_to_review__*",
    "app.files.approval.x__apply_rule__*",
    "app.files.approval.x_earlier__*",
    "app.files.approval.x_public_hash__*",
    "app.files.approval.x_bound_matches__*",
    "app.files.approval.x__hold_fields__*",
    "app.files.approval.x__supersede__*",
    "app.files.approval.x_hold_content__*",
    "app.files.approval.x_before_delete__*",
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
    "test_folder_matching.py",
    # the audit trail: verify, prune, the chain
    "test_chain.py",
    "test_trail.py",
    "test_bounds.py",
    # the statistics' counting rules
    "test_counting.py",
    "test_views.py",
    "test_reading.py",
    "test_entry.py",
    "test_delivered.py",
    "test_sums.py",
    "test_visitors.py",
    "test_link_secrecy.py",
    # a download in flight ends when the right to it does (the recheck, with the test client)
    "test_recheck_in_flight.py",
    # a link's expiry to the second, its first use; a single download's visitor
    "test_link_mutants.py",
    "test_count_mutants.py",
    # the public feed's embargo day (`downloadable` for the public), a link holder's pages
    "test_feeds.py",
    "test_holder.py",
    # the release-approval rule (not test_race.py: it starts servers)
    "test_requests.py",
    "test_four_eyes_machine.py",
    "test_rule_mutants.py",
    "test_held_changes.py",
    "test_held_bindings.py",
    "test_held_mutants.py",
    "test_approve_mutants.py",
    # an approval registers the record's DOI (tests/doi, against the fake DataCite)
    "test_approval.py",
}

ACCEPTED = Path("docs/mutation.md")
DETECTED = {"killed", "timeout", "caught by type check"}


def mutmut(*args: str, capture: bool = False) -> subprocess.CompletedProcess[str]:
    command = [str(Path(sys.executable).with_name("mutmut")), *args]
    return subprocess.run(command, text=True, capture_output=capture, check=False)


#: A row of the accepted survivors' table: the mutant, the change it makes (as `change`
#: gives it), and why it cannot matter.
ACCEPTED_ROW = re.compile(r"^\| `([^`]+)` \| `(.+?)` \| (.+?) \|$", re.MULTILINE)


def accepted_survivors() -> dict[str, tuple[str, str]]:
    """Mutant name -> (its change, the reason), from the table in docs/mutation.md."""
    if not ACCEPTED.exists():
        return {}
    return {
        name: (change.replace("\\|", "|"), reason)
        for name, change, reason in ACCEPTED_ROW.findall(ACCEPTED.read_text())
    }


def generate() -> dict[str, Path]:
    """mutmut's own first step of `mutmut run` (which then finds the files unchanged and keeps
    them, names and all): every mutant's name, with the source file it mutates."""
    from mutmut.__main__ import create_mutants
    from mutmut.utils.file_utils import copy_also_copy_files, copy_src_dir

    with open(os.devnull, "w") as quiet, contextlib.redirect_stdout(quiet):
        copy_src_dir()
        copy_also_copy_files()
        create_mutants(os.cpu_count() or 2)
    names = {}
    for meta in Path("mutants").rglob("*.py.meta"):
        source = meta.relative_to("mutants").with_suffix("")
        names.update(dict.fromkeys(json.loads(meta.read_text())["exit_code_by_key"], source))
    return names


def change(name: str, source: Path) -> str:
    """What the mutant changes: its new lines (or, if it only removes, the removed ones), as
    mutmut shows them, stripped and joined."""
    from mutmut.mutation.diff_apply import get_diff_for_mutant

    lines = get_diff_for_mutant(name, path=source).splitlines()[2:]
    added = [line[1:].strip() for line in lines if line.startswith("+")]
    removed = [line[1:].strip() for line in lines if line.startswith("-")]
    return " / ".join(added) if added else "removed: " + " / ".join(removed)


@contextlib.contextmanager
def postgres_template(folder: Path) -> Any:
    """One migrated PostgreSQL database for every mutant's session (TEST_POSTGRES_TEMPLATE):
    each session of the cache tests migrated its own first (about 2 s of migrations and a
    DROP for every such mutant); dropped at the end. Without a server, nothing."""
    import sqlalchemy as sa

    from tests.conftest import POSTGRES_URL, _postgres_unavailable_reason, migrate_database

    if _postgres_unavailable_reason():
        yield
        return
    name = f"filerepo_mutation_{os.getpid()}"
    admin = sa.create_engine(POSTGRES_URL, isolation_level="AUTOCOMMIT")
    with admin.connect() as connection:
        connection.execute(sa.text(f'CREATE DATABASE "{name}"'))
    try:
        url = sa.make_url(POSTGRES_URL).set(database=name).render_as_string(False)
        migrate_database(url, folder)
        os.environ["TEST_POSTGRES_TEMPLATE"] = name
        yield
    finally:
        with admin.connect() as connection:
            connection.execute(sa.text(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)'))
        admin.dispose()


def results(names: list[str]) -> dict[str, str]:
    """Mutant name -> status, for the mutants in `names`."""
    listed = mutmut("results", "--all", "true", capture=True).stdout
    statuses = dict(re.findall(r"^\s+(\S+): (.+)$", listed, re.MULTILINE))
    return {name: statuses.get(name, "not checked") for name in names}


def print_worker_times() -> None:
    """Where the mutants' CPU time went: by outcome, and the functions that cost most."""
    path = Path("mutants") / WORKER_TIMES
    if not path.exists():
        return
    lines = [json.loads(line) for line in path.read_text().splitlines()]
    by_outcome: dict[str, list[float]] = {}
    by_function: dict[str, list[float]] = {}
    for line in lines:
        outcome = "survived" if line["exit"] == 0 else "detected"
        by_outcome.setdefault(outcome, []).append(line["cpu"])
        by_function.setdefault(line["mutant"].rpartition("__mutmut_")[0], []).append(line["cpu"])
    print(
        "CPU seconds of the mutants' workers: "
        + "; ".join(
            f"{outcome} {len(cpu)} mutants, {sum(cpu):.0f} s ({sum(cpu) / len(cpu):.2f} each)"
            for outcome, cpu in sorted(by_outcome.items())
        )
    )
    costly = sorted(by_function.items(), key=lambda item: -sum(item[1]))[:8]
    print("  most: " + ", ".join(f"{name} {sum(cpu):.0f} s" for name, cpu in costly))


def main(patterns: list[str]) -> int:
    scope = [p for p in SCOPE if any(fnmatch.fnmatch(p, q) or p.startswith(q) for q in patterns)]
    scope = scope if patterns else SCOPE
    if not scope:
        print(f"no function of SCOPE matches {patterns}", file=sys.stderr)
        return 2
    # A test file renamed or moved out of tests/ would leave its functions without tests.
    present = {path.name for path in Path("tests").rglob("test_*.py")}
    named = TEST_FILES.union(*COVERING.values())
    if named - present or named - TEST_FILES:
        print(
            f"test files of COVERING or TEST_FILES not under tests/: {sorted(named - present)};"
            f" of COVERING not in TEST_FILES: {sorted(named - TEST_FILES)}",
            file=sys.stderr,
        )
        return 2
    shutil.rmtree("mutants", ignore_errors=True)  # stale copies would be tested otherwise
    start = time.monotonic()
    generated = generate()
    names = sorted(n for n in generated if any(fnmatch.fnmatch(n, p) for p in scope))
    # A function that moved or was renamed would otherwise leave the score without a word.
    lost = [p for p in scope if not any(fnmatch.fnmatch(name, p) for name in names)]
    if lost:
        print(
            f"no mutants for {', '.join(lost)}: a function moved or was renamed; update SCOPE"
            " and COVERING here and only_mutate in pyproject.toml.",
            file=sys.stderr,
        )
        return 1
    # Survivors accepted in docs/mutation.md are not run again (each would run every test
    # that covers it, for the known answer), as long as the mutant of that name still makes
    # the change the table names: code changed above it renumbers a function's mutants.
    accepted = accepted_survivors()
    known = {
        name
        for name in names
        if name in accepted and change(name, generated[name]) == accepted[name][0]
    }
    run_names = [name for name in names if name not in known]
    with tempfile.TemporaryDirectory() as folder, postgres_template(Path(folder)):
        # The tests run once per mutant: one migrated SQLite file serves all of the runs.
        from tests.conftest import migrate_database

        template = Path(folder) / "template.sqlite3"
        migrate_database(f"sqlite:///{template}", Path(folder))
        os.environ["TEST_SQLITE_TEMPLATE"] = str(template)
        run = mutmut("run", "--max-children", str(os.cpu_count() or 2), *run_names)
    minutes = (time.monotonic() - start) / 60
    cpu = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu_minutes = (cpu.ru_utime + cpu.ru_stime) / 60
    statuses = results(run_names)
    if run.returncode != 0 or not statuses:
        print(f"mutmut run failed (exit {run.returncode})", file=sys.stderr)
        return 1

    detected = [name for name, status in statuses.items() if status in DETECTED]
    survivors = sorted(name for name, status in statuses.items() if status not in DETECTED)
    score = 100 * len(detected) / len(names)
    print()
    print(
        f"Mutation score: {score:.1f} % ({len(detected)} of {len(names)} mutants detected; "
        f"{len(known)} survivors accepted in {ACCEPTED} not run again)"
    )
    # Wall time depends on what else the machine runs; the CPU time of the runs does not.
    print(
        f"Run time: {minutes:.1f} min; CPU time of the test runs {cpu_minutes:.1f} min "
        f"on {os.cpu_count()} cores (load average now {os.getloadavg()[0]:.1f})"
    )
    print_worker_times()
    for name in survivors:
        print(f"\n[NEW] {name} ({statuses[name]})")
        print(f"    change: `{change(name, generated[name])}`")
        if name in accepted:
            print(f"    accepted as `{accepted[name][0]}`: renumbered, or the line changed")
        print(mutmut("show", name, capture=True).stdout.rstrip())
    if survivors:
        print(f"\n{len(survivors)} survivor(s) not accepted in {ACCEPTED}: write a test, or say")
        print("why the change cannot matter (a row: the mutant, its change as printed, why).")
    return 1 if survivors else 0


# --- pytest plugin: loaded in mutmut's runs only (`-p tests.support.mutation` in pyproject) ---


def pytest_configure(config: Any) -> None:
    """Hypothesis, in mutmut's runs: the same examples every run (a mutant's verdict does not
    depend on luck), no example database in mutants/, and no shrinking: a property broken by a
    mutant fails at its first counterexample, where shrinking it ran into mutmut's CPU limit
    (a timeout of tens of CPU seconds instead of a kill in one). The tests' own `settings(...)`
    take what they do not set from this profile (they are made after it is loaded)."""
    from hypothesis import Phase, settings

    settings.register_profile(
        "mutation",
        derandomize=True,
        database=None,
        phases=[Phase.explicit, Phase.reuse, Phase.generate],
    )
    settings.load_profile("mutation")


def pytest_collection_finish(session: Any) -> None:
    """mutmut's fork server collects the tests once (`--collect-only`) and forks a worker per
    mutant from there. Whatever the first app, request or counted download of a process
    imports or compiles (the pages' and exports' modules, the COUNTER lists' expressions: about
    three CPU seconds) is done here once, instead of once in every worker. Nothing of it stays
    open: the app's engine is disposed, and no thread is started."""
    if not session.config.option.collectonly or not os.environ.get("TEST_SQLITE_TEMPLATE"):
        return
    warm_up(Path(os.environ["TEST_SQLITE_TEMPLATE"]))


def warm_up(template: Path) -> None:
    """One app on a copy of the migrated template, two plain reads through it, and the
    OpenAPI contract the tests' client checks answers against (built once per process).
    Reads only: an upload starts threads (its pools), and a process forked from one whose
    threads held a lock hangs (tried: the first worker waited forever)."""
    from counter_robots import is_machine, is_robot

    from app import create_app
    from app.extensions import db
    from tests.conftest import base_config
    from tests.support.openapi_client import contract_for

    is_machine("warm-up")
    is_robot("warm-up")
    with tempfile.TemporaryDirectory() as folder:
        shutil.copyfile(template, Path(folder) / "db.sqlite3")
        app = create_app(
            base_config(
                SQLALCHEMY_DATABASE_URI=f"sqlite:///{folder}/db.sqlite3",
                STORAGE_LOCAL_ROOT=f"{folder}/storage",
            )
        )
        contract_for(app)
        client = app.test_client()
        client.get("/api/public/files")
        client.get("/")
        with app.app_context():
            db.session.remove()
            db.engine.dispose()


@pytest.hookimpl(wrapper=True)
def pytest_runtest_protocol(item: Any, nextitem: Any) -> Any:
    """Each test outside `mutmut run`'s own click context, as under `make test`: mutmut runs
    the clean and the stats runs in its own process, inside its command, where the audit
    trail would name `cli:run` as the actor of what a test does outside any command."""
    from click import globals as click_globals

    stack = click_globals._local.__dict__.pop("stack", None)
    try:
        yield
    finally:
        if stack is not None:
            click_globals._local.stack = stack


#: Each mutant's worker adds a line here (in mutants/): its name, pytest's exit status, and
#: the CPU seconds it used, which the summary sums by function and outcome.
WORKER_TIMES = "worker-times.jsonl"


def pytest_sessionfinish(session: Any, exitstatus: int) -> None:
    mutant = os.environ.get("MUTANT_UNDER_TEST", "")
    if "__mutmut_" not in mutant:
        return
    used = resource.getrusage(resource.RUSAGE_SELF)  # a forked worker's own, from its fork
    line = {"mutant": mutant, "exit": int(exitstatus), "cpu": used.ru_utime + used.ru_stime}
    with open(WORKER_TIMES, "a") as times:
        times.write(json.dumps(line) + "\n")


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
LINKS = {"test_links.py", "test_link_properties.py", "test_link_mutants.py"}
AUDIT = {"test_chain.py", "test_trail.py"}
STATS = {"test_counting.py", "test_views.py", "test_visitors.py", "test_count_mutants.py"}
#: sums over several days, doors, machines and records (`Counts.add`, `human`, `record_totals`)
SUMS = {"test_sums.py"}
RELEASES = {
    "test_requests.py",
    "test_rule_mutants.py",
    "test_held_changes.py",
    "test_held_bindings.py",
    "test_held_mutants.py",
    "test_approve_mutants.py",
    "test_four_eyes_machine.py",
}
COVERING = {
    "app.files.access.x_may_see_": SQLITE_ACCESS | LINKS,
    "app.files.access.x_visible_": SQLITE_ACCESS | LINKS,
    "app.files.access.x_read_record_": SQLITE_ACCESS | {"test_record_cache.py"},
    "app.files.access.x_downloadable_record_": {"test_download.py", "test_record_cache.py"},
    # a link holder's reach, in SQL and for one record (issue 37)
    "app.files.access.x__in_folder__": LINKS | {"test_folder_matching.py"},
    "app.files.access.x__named_by__": LINKS | {"test_folder_matching.py"},
    "app.files.access.x__is_named_by__": LINKS | {"test_folder_matching.py"},
    # the public's embargo rule in SQL: the feeds list it without `visible` (an unreleased
    # record, and the embargo's last day)
    "app.files.access.x_downloadable__": LINKS | {"test_folder_matching.py", "test_feeds.py"},
    "app.files.access.": SQLITE_ACCESS,
    "app.files.listing.": LISTS,
    "app.files.pagination.": LISTS,
    "app.files.downloads.x_download_response_": {
        "test_download.py",
        "test_recheck_in_flight.py",
        "test_record_cache.py",
    },
    "app.files.downloads.": {"test_download.py", "test_recheck_in_flight.py"},
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
    # issue 37: links, the audit trail, the statistics' counting
    # which pages are a holder's: only the pages' tests reach `is_holder_page`
    "app.links.holder.x_is_holder_page_": {"test_holder.py"},
    "app.links.holder.": LINKS | {"test_link_secrecy.py"},
    "app.links.services.x_resolve_": LINKS | {"test_link_secrecy.py"},
    "app.links.": LINKS,
    # long values kept as their length and SHA-256
    "app.audit.trail.x_bounded_": {"test_bounds.py"},
    "app.audit.trail.": AUDIT | {"test_entry.py"},
    "app.audit.": AUDIT,
    # issue 36: what a ZIP's members count, and the record's public figures
    "app.stats.collector.x_deferred_counter_": {"test_delivered.py", "test_visitors.py"},
    "app.stats.collector.x__visitor_of_request_": STATS | {"test_delivered.py"},
    "app.stats.queries.x_record_totals_": SUMS | {"test_reading.py", "test_delivered.py"},
    "app.stats.queries.": STATS | SUMS | {"test_reading.py"},
    "app.stats.": STATS,
    # issue 38: the release-approval rule and what cancels a request
    "app.releases.services.x_approve_": RELEASES | {"test_approval.py"},
    "app.releases.services.": RELEASES,
    "app.files.approval.": RELEASES,
}


def _covering(mutant: str) -> set[str] | None:
    return next((files for prefix, files in COVERING.items() if mutant.startswith(prefix)), None)


def pytest_load_initial_conftests(early_config: Any, parser: Any, args: list[str]) -> None:
    """For a mutant, collect only its COVERING files of the tests mutmut names (every test
    that calls the function, in up to 30 files): collecting them all cost a worker 0.36 CPU
    seconds, one file 0.16. If none of them is covering, the deselection below answers."""
    files = _covering(os.environ.get("MUTANT_UNDER_TEST", ""))
    if files is None:
        return
    kept = [arg for arg in args if "::" in arg and Path(arg.split("::")[0]).name in files]
    if kept:
        args[:] = [arg for arg in args if "::" not in arg or arg in kept]


def pytest_collection_modifyitems(session: Any, config: Any, items: list[Any]) -> None:
    """For a mutant, the tests of its module (COVERING), cheapest first: its run stops at the
    first failing test (`-x`). SQLite tests before the PostgreSQL ones (a database each), then
    by the time mutmut measured."""
    files = _covering(os.environ.get("MUTANT_UNDER_TEST", ""))
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
