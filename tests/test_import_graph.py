"""`app/` has no import circle: every module can be read (and imported) after the modules it
names, which is what keeps a package's concern its own. Graph from grimp; circles by Tarjan."""

from __future__ import annotations

import grimp


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
