"""The README's pictures of the code stay true (issue 47): its layer diagram is the layers
contract of `[tool.importlinter]` in pyproject.toml, and the layout tables (the README's for
`app/`, tests/README.md's for `tests/`) name every package and every test folder. A package,
a folder or a layer added without its line fails here, naming it. And the README stays a
front door that fits in a head: at most 350 lines, the rest in docs/."""

from __future__ import annotations

import re
import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
README = ROOT / "README.md"
TESTS_README = ROOT / "tests" / "README.md"
PYPROJECT = ROOT / "pyproject.toml"
#: The diagram's heading line and its last layer's name.
DIAGRAM = "**Imports run one way**"
CORE = "core"
README_LINES = 350


def diagram(readme: str) -> list[str]:
    """The README's layers, top down: each as the contract writes a layer of packages side by
    side (`a | b`), the core as the sorted names of its modules joined by ` : `."""
    block = readme[readme.index(DIAGRAM) :]
    block = block[block.index("```\n") + 4 :]
    lines = block[: block.index("```")].splitlines()
    layers, core = [], []
    for line in lines[1:]:  # the first is the factory, above every layer
        if line.startswith(CORE + " ") or (core and line.startswith(" ")):
            core += re.findall(r"[a-z_]+", line.removeprefix(CORE))
        else:
            layers.append(" | ".join(name.strip() for name in line.split("|")))
    return [*layers, " : ".join(sorted(core))]


def contract_layers(pyproject: str) -> list[str]:
    """The layers contract of `[tool.importlinter]`, top down, written as `diagram` writes them."""
    contracts = tomllib.loads(pyproject)["tool"]["importlinter"]["contracts"]
    (layers,) = [contract["layers"] for contract in contracts if contract["id"] == "layers"]
    written = []
    for layer in layers:
        if ":" in layer:
            written.append(" : ".join(sorted(name.strip() for name in layer.split(":"))))
        else:
            written.append(" | ".join(name.strip() for name in layer.split("|")))
    return written


def named_in_table(markdown: str) -> set[str]:
    """Every path in backticks in the first cell of a table row, without its trailing `/`."""
    named = set()
    for row in re.findall(r"^\|([^|\n]+)\|", markdown, re.M):
        named |= {path.rstrip("/") for path in re.findall(r"`([^`]+)`", row)}
    return named


def folders(root: Path, under: str) -> set[str]:
    return {
        f"{under}/{path.name}"
        for path in (root / under).iterdir()
        if path.is_dir() and not path.name.startswith((".", "__")) and path.name != "node_modules"
    }


def undocumented(root: Path, readme: str, tests_readme: str) -> list[str]:
    """The packages of app/ the README's layout leaves out, the folders of tests/
    tests/README.md leaves out."""
    missing = sorted(folders(root, "app") - named_in_table(readme))
    return missing + sorted(folders(root, "tests") - named_in_table(tests_readme))


def test_the_layer_diagram_is_the_import_contract():
    assert diagram(README.read_text()) == contract_layers(PYPROJECT.read_text())


def test_every_package_and_test_folder_is_in_a_layout_table():
    assert undocumented(ROOT, README.read_text(), TESTS_README.read_text()) == []


def test_the_readme_fits_in_a_head():
    assert len(README.read_text().splitlines()) <= README_LINES


def test_the_checks_notice_what_is_left_out(tmp_path: Path):
    """A layer, a package and a test folder added without their lines: each is named."""
    readme, pyproject = README.read_text(), PYPROJECT.read_text()
    added_layer = pyproject.replace('    "pages",\n', '    "pages",\n    "reports",\n', 1)
    assert diagram(readme) != contract_layers(added_layer)
    moved = pyproject.replace('"audit | stats"', '"audit | stats | search"', 1)
    moved = moved.replace('"auth | search"', '"auth"', 1)
    assert diagram(readme) != contract_layers(moved)
    core = pyproject.replace(": streaming", ": streaming : tasks", 1)
    assert diagram(readme) != contract_layers(core)

    for name in ("app/auth", "app/reports", "tests/auth", "tests/reports", "tests/__pycache__"):
        (tmp_path / name).mkdir(parents=True)
    assert undocumented(tmp_path, readme, TESTS_README.read_text()) == [
        "app/reports",
        "tests/reports",
    ]
