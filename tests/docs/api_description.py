"""The lines that describe the API (issue 47's count): every line of the `.py` files under
app/docs/ and of app/tus/api_doc.py, and every line of the describing decorators on views
elsewhere (a blueprint's `doc`, `alt_response`, `errors`, `response`, `arguments`, `paginate`,
each as many lines as the decorator spans).

    python -m tests.docs.api_description [ROOT]    # ROOT: a checkout, default "."
"""

from __future__ import annotations

import ast
import sys
from dataclasses import dataclass, field
from pathlib import Path

DESCRIBING = {"doc", "alt_response", "errors", "response", "arguments", "paginate"}
DOCS = Path("app/docs")
TUS_DOC = Path("app/tus/api_doc.py")


@dataclass
class Count:
    files: dict[str, int] = field(default_factory=dict)
    decorators: dict[str, int] = field(default_factory=dict)

    @property
    def total(self) -> int:
        return sum(self.files.values()) + sum(self.decorators.values())


def _decorator_lines(source: str) -> int:
    lines = 0
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
            for decorator in node.decorator_list:
                called = decorator.func if isinstance(decorator, ast.Call) else decorator
                if isinstance(called, ast.Attribute) and called.attr in DESCRIBING:
                    lines += decorator.end_lineno - decorator.lineno + 1  # type: ignore[operator]
    return lines


def count(root: Path = Path(".")) -> Count:
    found = Count()
    for path in sorted((root / "app").rglob("*.py")):
        relative = path.relative_to(root)
        source = path.read_text(encoding="utf-8")
        if relative == TUS_DOC or DOCS in relative.parents:
            found.files[str(relative)] = len(source.splitlines())
        elif lines := _decorator_lines(source):
            found.decorators[str(relative)] = lines
    return found


def main(root: str = ".") -> None:
    found = count(Path(root))
    for name, lines in [*found.files.items(), *found.decorators.items()]:
        print(f"{lines:5}  {name}{'' if name in found.files else ' (decorators)'}")
    print(f"{found.total:5}  in all")


if __name__ == "__main__":
    main(*sys.argv[1:2])
