"""Imports run one way in `app/` (README, "Layout").

- No import circle between modules: every module can be read (and imported) after the modules
  it names, which is what keeps a package's concern its own. Graph from grimp; circles by Tarjan.
- The contracts of `[tool.importlinter]` in pyproject.toml: the packages' layers (a layer
  imports only those below it; the core imports no feature package) and a package's routes
  imported by the factory alone.
- No name beginning with `_` is imported from another package (or core module).
- No module wires a listener (SQLAlchemy events, signals) when it is imported: each package
  does in its `init_app`, which the factory calls.
"""

from __future__ import annotations

import ast
import copy
import subprocess
import sys
from pathlib import Path

import grimp
import pytest
from importlinter.adapters.user_options import TomlFileUserOptionReader
from importlinter.cli import EXIT_STATUS_SUCCESS
from importlinter.contracts.layers import LayersContract
from importlinter.contracts.protected import ProtectedContract

ROOT = Path(__file__).resolve().parent.parent
PYPROJECT = ROOT / "pyproject.toml"


def import_circles(package: str) -> list[list[str]]:
    """The strongly connected groups of more than one module (each is an import circle)."""
    graph = grimp.build_graph(package, cache_dir=None)
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    circles: list[list[str]] = []

    def visit(module: str) -> None:
        index[module] = low[module] = len(index)
        stack.append(module)
        for imported in sorted(graph.find_modules_directly_imported_by(module)):
            if imported not in index:
                visit(imported)
                low[module] = min(low[module], low[imported])
            elif imported in stack:
                low[module] = min(low[module], index[imported])
        if low[module] == index[module]:
            group = stack[stack.index(module) :]
            del stack[stack.index(module) :]
            if len(group) > 1:
                circles.append(sorted(group))

    for module in sorted(graph.modules):
        if module not in index:
            visit(module)
    return circles


def test_app_has_no_import_circle() -> None:
    assert import_circles("app") == []


def test_a_circle_is_found(tmp_path, monkeypatch) -> None:
    """The check sees a circle when there is one (two modules importing each other)."""
    package = tmp_path / "circled"
    package.mkdir()
    (package / "__init__.py").write_text("")
    (package / "a.py").write_text("from circled import b\n")
    (package / "b.py").write_text("import circled.a\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    assert import_circles("circled") == [["circled.a", "circled.b"]]


# --- the contracts ----------------------------------------------------------------------


def test_the_contracts_are_kept() -> None:
    """`lint-imports` as a developer runs it, on pyproject.toml's contracts. In a process of its
    own: it configures logging with `dictConfig`, which would disable the loggers of the app
    that this process has created (the access log the operability tests read)."""
    finished = subprocess.run(
        [sys.executable, "-c", LINT_IMPORTS, str(PYPROJECT)],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert finished.returncode == EXIT_STATUS_SUCCESS, finished.stdout + finished.stderr


#: `lint-imports --no-cache` through the venv's Python (its script may not be on PATH).
LINT_IMPORTS = (
    "import sys; from importlinter.cli import lint_imports; "
    "sys.exit(lint_imports(config_filename=sys.argv[1], no_cache=True, no_logo=True))"
)


def broken_contracts(graph: grimp.ImportGraph) -> list[str]:
    """The ids of pyproject.toml's contracts `graph` breaks."""
    options = TomlFileUserOptionReader().read_options(config_filename=str(PYPROJECT))
    assert options is not None
    session = {"root_packages": [options.session_options["root_package"]]}
    kinds = {"layers": LayersContract, "protected": ProtectedContract}
    broken = []
    for contract_options in options.contracts_options:
        contract = kinds[contract_options["type"]](
            name=contract_options["name"],
            session_options=session,
            contract_options=contract_options,
        )
        if not contract.check(copy.deepcopy(graph), verbose=False).kept:
            broken.append(contract_options["id"])
    return broken


@pytest.fixture(scope="module")
def app_graph() -> grimp.ImportGraph:
    return grimp.build_graph("app", cache_dir=None)


def test_todays_graph_keeps_the_contracts(app_graph) -> None:
    assert broken_contracts(app_graph) == []


@pytest.mark.parametrize(
    ("importer", "imported", "broken"),
    [
        # Constants of another package's routes (as archives, feeds and stats took them).
        ("app.stats.routes", "app.public.routes", ["layers", "routes"]),
        # A feature package of the same layer's routes, a lower one's routes.
        ("app.links.routes", "app.archives.routes", ["routes"]),
        ("app.pages.holder", "app.links.routes", ["routes"]),
        # The core importing a feature package (app/errors.py took the pages' error page).
        ("app.errors", "app.pages.errors", ["layers"]),
        ("app.server", "app.auth.guard", ["layers"]),
        # A lower package importing a higher one (the loop of ten packages went through
        # these), and two packages of one layer importing each other.
        ("app.auth.services", "app.audit", ["layers"]),
        ("app.files.routes", "app.stats", ["layers"]),
        ("app.archives.routes", "app.public.routes", ["layers", "routes"]),
    ],
)
def test_the_contracts_catch_an_import_against_them(app_graph, importer, imported, broken):
    graph = copy.deepcopy(app_graph)
    graph.add_import(importer=importer, imported=imported)
    assert broken_contracts(graph) == broken


# --- private names ------------------------------------------------------------------------


def modules_of(root: Path, package: str) -> dict[str, Path]:
    """The modules of `package` under `root` by dotted name."""
    modules = {}
    for path in sorted((root / package).rglob("*.py")):
        parts = path.relative_to(root).with_suffix("").parts
        if parts[-1] == "__init__":
            parts = parts[:-1]
        modules[".".join(parts)] = path
    return modules


def unit_of(module: str, packages: set[str]) -> str:
    """The package a module belongs to (`app.files` of `app.files.listing`), or the module
    itself when it is no package's below the root (`app.errors`)."""
    parts = module.split(".")
    return ".".join(parts[:2]) if ".".join(parts[:2]) in packages else module


def private_imports(root: Path, package: str) -> list[str]:
    """`module:line name from other` for each `_name` a module takes from another package."""
    modules = modules_of(root, package)
    packages = {name for name, path in modules.items() if path.name == "__init__.py"}
    found = []
    for module, path in modules.items():
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if not isinstance(node, ast.ImportFrom):
                continue
            if node.level:  # relative: from the module's own package, or above it
                here = module.split(".")[: None if path.name == "__init__.py" else -1]
                base = here[: len(here) - node.level + 1]
                source = ".".join(base + ([node.module] if node.module else []))
            else:
                source = node.module or ""
            if source.split(".")[0] != package:
                continue
            for alias in node.names:
                taken = f"{source}.{alias.name}"
                private = alias.name.startswith("_") or any(
                    part.startswith("_") for part in source.split(".")
                )
                if private and unit_of(taken, packages) != unit_of(module, packages):
                    found.append(f"{module}:{node.lineno} {alias.name} from {source}")
    return found


def test_no_private_name_is_taken_from_another_package() -> None:
    assert private_imports(ROOT, "app") == []


def test_a_private_name_from_another_package_is_found(tmp_path) -> None:
    package = tmp_path / "shop"
    for folder in ("shop", "shop/links", "shop/pages"):
        (tmp_path / folder).mkdir(exist_ok=True)
        (tmp_path / folder / "__init__.py").write_text("")
    (package / "links" / "routes.py").write_text("def _open():\n    pass\n")
    (package / "links" / "other.py").write_text("from shop.links.routes import _open\n")
    (package / "pages" / "holder.py").write_text("from shop.links.routes import _open, bp\n")
    assert private_imports(tmp_path, "shop") == ["shop.pages.holder:1 _open from shop.links.routes"]


# --- listeners ----------------------------------------------------------------------------

#: What attaches a listener: SQLAlchemy's `event.listen`/`listens_for`, blinker's `connect`.
WIRING = {"listen", "listens_for", "connect", "connect_via"}


def _wires(node: ast.AST) -> bool:
    call = node.func if isinstance(node, ast.Call) else None
    name = getattr(call, "attr", None) or getattr(call, "id", None)
    return name in WIRING


def import_time_listeners(root: Path, package: str) -> list[str]:
    """`module:line` of each listener a module attaches when it is imported: a wiring call in
    its body (a function's body runs later) or as a decorator of what it defines."""
    found = []

    def visit(module: str, node: ast.AST) -> None:
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
            for decorator in node.decorator_list:
                if _wires(decorator):
                    found.append(f"{module}:{decorator.lineno}")
            if not isinstance(node, ast.ClassDef):
                return
            for child in node.body:
                visit(module, child)
            return
        if isinstance(node, ast.Lambda):
            return
        if _wires(node):
            found.append(f"{module}:{node.lineno}")
        for child in ast.iter_child_nodes(node):
            visit(module, child)

    for module, path in modules_of(root, package).items():
        visit(module, ast.parse(path.read_text(encoding="utf-8")))
    return found


def test_no_module_attaches_a_listener_when_imported() -> None:
    found = import_time_listeners(ROOT, "app")
    assert found == []


def test_a_listener_attached_on_import_is_found(tmp_path) -> None:
    (tmp_path / "wired").mkdir()
    (tmp_path / "wired" / "__init__.py").write_text("")
    (tmp_path / "wired" / "stored.py").write_text(
        "from sqlalchemy import event\n"
        "@event.listens_for(object, 'after_insert')\n"
        "def inserted(*args):\n"
        "    pass\n"
        "event.listen(object, 'after_update', inserted)\n"
        "def init_app():\n"
        "    event.listen(object, 'after_delete', inserted)\n"
    )
    assert import_time_listeners(tmp_path, "wired") == ["wired.stored:2", "wired.stored:5"]
