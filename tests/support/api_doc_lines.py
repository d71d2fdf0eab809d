"""Lines spent describing the API: the documenting decorators on views outside app/docs and the
docstrings of those views (flask-smorest takes an operation's summary and description from
them), every line of app/docs/ (the document module and the page that serves it) and
app/tus/api_doc.py.

    python tests/support/api_doc_lines.py [ROOT]    # ROOT: a checkout, default "."
"""

import ast
import pathlib
import sys

root = pathlib.Path(sys.argv[1] if len(sys.argv) > 1 else ".")
DOC = {"openapi", "doc", "alt_response", "errors", "response", "arguments"}
deco = 0
for path in sorted((root / "app").rglob("*.py")):
    if "docs" in path.parts:
        continue
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            documented = False
            for d in node.decorator_list:
                f = d.func if isinstance(d, ast.Call) else d
                if (f.attr if isinstance(f, ast.Attribute) else getattr(f, "id", "")) in DOC:
                    deco += d.end_lineno - d.lineno + 1
                    documented = True
            first = node.body[0]
            if documented and ast.get_docstring(node) is not None:
                deco += first.end_lineno - first.lineno + 1


def lines(path: pathlib.Path) -> int:
    return len(path.read_text().splitlines()) if path.exists() else 0


docs = {p.name: lines(p) for p in sorted((root / "app/docs").glob("*.py"))}
tus = lines(root / "app/tus/api_doc.py")
total = deco + sum(docs.values()) + tus
print(f"decorators {deco} + app/docs {sum(docs.values())} {docs} + tus/api_doc {tus} = {total}")
