"""`make mutate`: mutation testing of the rules a slip in which no user would notice at once.

mutmut (configured in pyproject.toml, `[tool.mutmut]`) copies the project into mutants/, makes
small changes ("mutants") to the functions of tests/mutation_scope.toml one at a time and runs
the tests that call them. A mutant no test notices has survived: a test is missing, or the
change cannot matter; the second kind is accepted in that file with its reason. This script
prints the score and every survivor not accepted, and fails on them.

Run from the project root: `python -m tests.support.mutation` (what `make mutate` does), or
with prefixes of the functions' dotted names to run a part (`... app.links. app.stats.`).
"""

from __future__ import annotations

import ast
import contextlib
import fnmatch
import functools
import json
import os
import re
import resource
import shutil
import subprocess
import sys
import tempfile
import time
import tomllib
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parents[2]
SCOPE_FILE = ROOT / "tests" / "mutation_scope.toml"
DETECTED = {"killed", "timeout", "caught by type check"}


@dataclass(frozen=True)
class Function:
    """A function mutated (`name`, or `Class.method`, `Class.*`) and the tests its mutants run."""

    file: str
    name: str
    tests: frozenset[str]

    @property
    def dotted(self) -> str:
        return self.file.removesuffix(".py").replace("/", ".") + "." + self.name

    @property
    def stem(self) -> str:
        """mutmut's name of the function, the part of its mutants' names before `__mutmut_`."""
        module = self.file.removesuffix(".py").replace("/", ".")
        owner, _, method = self.name.rpartition(".")
        return f"{module}.xǁ{owner}ǁ{method}" if owner else f"{module}.x_{method}"


@dataclass(frozen=True)
class Accepted:
    change: str
    reason: str


@dataclass(frozen=True)
class Scope:
    functions: tuple[Function, ...]
    accepted: dict[str, Accepted]

    @property
    def files(self) -> set[str]:
        return {function.file for function in self.functions}

    @property
    def test_files(self) -> frozenset[str]:
        return frozenset().union(*(function.tests for function in self.functions))

    def function_of(self, mutant: str) -> Function | None:
        stem = mutant.partition("__mutmut_")[0]
        return next((f for f in self.functions if fnmatch.fnmatchcase(stem, f.stem)), None)

    def select(self, patterns: list[str]) -> list[Function]:
        """The functions whose dotted names start with or match one of `patterns` (all: none)."""
        return [
            f
            for f in self.functions
            if not patterns
            or any(f.dotted.startswith(p) or fnmatch.fnmatchcase(f.dotted, p) for p in patterns)
        ]


def load(path: Path = SCOPE_FILE) -> Scope:
    data = tomllib.loads(path.read_text())
    functions = tuple(
        Function(part["file"], name, frozenset(part["tests"]))
        for part in data.get("functions", [])
        for name in part["names"]
    )
    accepted = {
        name: Accepted(entry.get("change", ""), " ".join(entry.get("reason", "").split()))
        for name, entry in data.get("accepted", {}).items()
    }
    return Scope(functions, accepted)


def defined(source: Path, name: str) -> bool:
    """Whether `name` (`f`, `Class.method`, `Class.*`) is a function or method in `source`."""
    owner, _, function = name.rpartition(".")
    body = ast.parse(source.read_text()).body
    if owner:
        classes = [node for node in body if isinstance(node, ast.ClassDef) and node.name == owner]
        if not classes or function == "*":
            return bool(classes)
        body = classes[0].body
    return any(
        isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef) and node.name == function
        for node in body
    )


def disagreements(scope: Scope, root: Path = ROOT) -> list[str]:
    """What in the scope, pyproject's `only_mutate` and the tree does not fit together: each
    would leave mutants untested, unmutated or accepted without a reason."""
    found = []
    pyproject = tomllib.loads((root / "pyproject.toml").read_text())
    only_mutate = set(pyproject["tool"]["mutmut"].get("only_mutate", []))
    for file in sorted(scope.files - only_mutate):
        found.append(f"{file} has functions in the scope but is not in only_mutate")
    for file in sorted(only_mutate - scope.files):
        found.append(f"{file} is in only_mutate but has no function in the scope")
    for test in sorted(scope.test_files):
        if not (root / test).is_file():
            found.append(f"{test} is named as covering tests but does not exist")
    seen: set[str] = set()
    for function in scope.functions:
        if function.dotted in seen:
            found.append(f"{function.dotted} is named twice")
        seen.add(function.dotted)
        source = root / function.file
        if not source.is_file() or not defined(source, function.name):
            found.append(f"{function.dotted} is not a function of {function.file}")
    for name, entry in sorted(scope.accepted.items()):
        if scope.function_of(name) is None or "__mutmut_" not in name:
            found.append(f"accepted {name} is not a mutant of a function in the scope")
        if not entry.change or not entry.reason:
            found.append(f"accepted {name} needs both its change and a reason")
    return found


def mutmut(*args: str, capture: bool = False) -> subprocess.CompletedProcess[str]:
    command = [str(Path(sys.executable).with_name("mutmut")), *args]
    return subprocess.run(command, text=True, capture_output=capture, check=False)


def statuses() -> dict[str, str]:
    """Every mutant's name and status, as `mutmut results` lists them."""
    listed = mutmut("results", "--all", "true", capture=True).stdout
    return dict(re.findall(r"^\s+(\S+): (.+)$", listed, re.MULTILINE))


def generate() -> list[str]:
    """mutmut's own first step of `mutmut run` (which then finds the files unchanged and keeps
    them, names and all), so that accepted survivors can be left out of the run: the names."""
    from mutmut.__main__ import create_mutants
    from mutmut.utils.file_utils import copy_also_copy_files, copy_src_dir

    with open(os.devnull, "w") as quiet, contextlib.redirect_stdout(quiet):
        copy_src_dir()
        copy_also_copy_files()
        create_mutants(os.cpu_count() or 2)
    return list(statuses())


def change(name: str, source: str) -> str:
    """What the mutant changes: its new lines (or, if it only removes, the removed ones), as
    mutmut shows them, stripped and joined."""
    from mutmut.mutation.diff_apply import get_diff_for_mutant

    lines = get_diff_for_mutant(name, path=source).splitlines()[2:]
    added = [line[1:].strip() for line in lines if line.startswith("+")]
    removed = [line[1:].strip() for line in lines if line.startswith("-")]
    return " / ".join(added) if added else "removed: " + " / ".join(removed)


def toml_string(text: str) -> str:
    return f"'{text}'" if "'" not in text else json.dumps(text, ensure_ascii=False)


@contextlib.contextmanager
def postgres_template(folder: Path) -> Iterator[None]:
    """One migrated PostgreSQL database for every mutant's session (TEST_POSTGRES_TEMPLATE)
    instead of a migration and a DROP in each session of the cache tests; dropped at the end.
    Without a server, nothing."""
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
    scope = load()
    problems = disagreements(scope)
    if problems:
        print(f"{SCOPE_FILE.relative_to(ROOT)} disagrees:", *problems, sep="\n  ", file=sys.stderr)
        return 2
    chosen = set(scope.select(patterns))
    if not chosen:
        print(f"no function of the scope matches {patterns}", file=sys.stderr)
        return 2
    shutil.rmtree("mutants", ignore_errors=True)  # stale copies would be tested otherwise
    start = time.monotonic()
    file_of = {
        name: function.file
        for name in generate()
        if (function := scope.function_of(name)) is not None and function in chosen
    }
    names = sorted(file_of)
    # A function that moved, was renamed or decorated would leave the score without a word.
    have = {scope.function_of(name) for name in names}
    lost = [f.dotted for f in scope.functions if f in chosen and f not in have]
    if lost:
        print(f"no mutants for {', '.join(lost)}: update {SCOPE_FILE.name}", file=sys.stderr)
        return 1
    # Accepted survivors are not run again (each would run all its tests for the known answer)
    # while the mutant of that name still makes the recorded change: code changed above it
    # renumbers a function's mutants.
    known = {
        name
        for name in names
        if name in scope.accepted and change(name, file_of[name]) == scope.accepted[name].change
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
    listed = statuses()
    results = {name: listed.get(name, "not checked") for name in run_names}
    if run.returncode != 0 or not results:
        print(f"mutmut run failed (exit {run.returncode})", file=sys.stderr)
        return 1

    detected = [name for name, status in results.items() if status in DETECTED]
    survivors = sorted(name for name, status in results.items() if status not in DETECTED)
    print(
        f"\nMutation score: {100 * len(detected) / len(names):.1f} % ({len(detected)} of "
        f"{len(names)} mutants detected; {len(known)} accepted survivors not run again)"
    )
    # Wall time depends on what else the machine runs; the CPU time of the runs does not.
    print(
        f"Run time: {minutes:.1f} min; CPU time of the test runs {cpu_minutes:.1f} min "
        f"on {os.cpu_count()} cores (load average now {os.getloadavg()[0]:.1f})"
    )
    print_worker_times()
    for name in survivors:
        now = change(name, file_of[name])
        print(f"\n[NEW] {name} ({results[name]})")
        if name in scope.accepted:
            print(f"    accepted as `{scope.accepted[name].change}`: renumbered, or changed")
        print(mutmut("show", name, capture=True).stdout.rstrip())
        print(f"\n[accepted.\"{name}\"]\nchange = {toml_string(now)}\nreason = '''\n'''")
    if survivors:
        print(f"\n{len(survivors)} survivor(s) not accepted in {SCOPE_FILE.name}: write a test")
        print("that fails with the mutant, or paste its entry above and say why it cannot matter.")
    return 1 if survivors else 0


# --- pytest plugin: loaded in mutmut's runs only (`-p tests.support.mutation` in pyproject) ---


@functools.cache
def _scope() -> Scope:
    return load()


def pytest_configure(config: Any) -> None:
    """Hypothesis, in mutmut's runs: the same examples every run (a mutant's verdict does not
    depend on luck), no example database in mutants/, and no shrinking, which ran a broken
    property into mutmut's CPU limit (a timeout instead of a kill). The tests' own
    `settings(...)` take what they do not set from this profile."""
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
    mutant from there: what the first app, request or counted download of a process imports
    or compiles is done here once instead of in every worker. Nothing of it stays open."""
    if not session.config.option.collectonly or not os.environ.get("TEST_SQLITE_TEMPLATE"):
        return
    warm_up(Path(os.environ["TEST_SQLITE_TEMPLATE"]))


def warm_up(template: Path) -> None:
    """One app on a copy of the migrated template, two plain reads through it, and the OpenAPI
    contract the tests' client checks answers against. Reads only: an upload starts pools,
    and a worker forked from a process whose threads held a lock hung."""
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
    its stats and clean runs inside its command, where the audit trail would name `cli:run`
    as the actor of what a test does outside any command."""
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


def pytest_ignore_collect(collection_path: Path, config: Any) -> bool | None:
    """Of the tests/ folder mutmut is given, only the test files of the scope."""
    if collection_path.suffix != ".py" or not collection_path.name.startswith("test_"):
        return None
    if not collection_path.is_relative_to(config.rootpath):
        return None
    relative = collection_path.relative_to(config.rootpath).as_posix()
    return True if relative not in _scope().test_files else None


def _covering(mutant: str) -> frozenset[str] | None:
    function = _scope().function_of(mutant) if "__mutmut_" in mutant else None
    return function.tests if function else None


def pytest_load_initial_conftests(early_config: Any, parser: Any, args: list[str]) -> None:
    """For a mutant, collect only its function's test files of the tests mutmut names (every
    test that calls the function): collecting them all cost a worker twice the CPU time. If
    none of them is, the deselection below answers."""
    files = _covering(os.environ.get("MUTANT_UNDER_TEST", ""))
    if files is None:
        return
    kept = [arg for arg in args if "::" in arg and arg.split("::")[0] in files]
    if kept:
        args[:] = [arg for arg in args if "::" not in arg or arg in kept]


def pytest_collection_modifyitems(session: Any, config: Any, items: list[Any]) -> None:
    """For a mutant, its function's tests, cheapest first: its run stops at the first failing
    test (`-x`). SQLite tests before the PostgreSQL ones (a database each), then by the time
    mutmut measured (mutants/mutmut-stats.json)."""
    files = _covering(os.environ.get("MUTANT_UNDER_TEST", ""))
    if files is not None:
        kept = [item for item in items if item.nodeid.split("::")[0] in files]
        config.hook.pytest_deselected(
            items=[item for item in items if item.nodeid.split("::")[0] not in files]
        )
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
