"""Compare two OpenAPI documents apart from ordering (object keys, `required`, `enum`), for a
refactoring of how the document is declared: `python -m tests.support.openapi_equal A B`
prints where they differ and exits 1, or says they are equal."""

from __future__ import annotations

import json
import sys
from typing import Any

UNORDERED = {"required", "enum"}


def normalised(value: Any, key: str = "") -> Any:
    if isinstance(value, dict):
        return {name: normalised(item, name) for name, item in sorted(value.items())}
    if isinstance(value, list):
        items = [normalised(item) for item in value]
        if key in UNORDERED:
            return sorted(items, key=json.dumps)
        return items
    return value


def differences(a: Any, b: Any, where: str = "#") -> list[str]:
    if isinstance(a, dict) and isinstance(b, dict):
        found = []
        for name in sorted(set(a) | set(b)):
            if name not in a or name not in b:
                found.append(f"{where}/{name}: only in {'after' if name in b else 'before'}")
            else:
                found += differences(a[name], b[name], f"{where}/{name}")
        return found
    return [] if a == b else [f"{where}: {json.dumps(a)[:120]} != {json.dumps(b)[:120]}"]


def main(before: str, after: str) -> int:
    with open(before) as one, open(after) as other:
        found = differences(normalised(json.load(one)), normalised(json.load(other)))
    print("\n".join(found) or "equal apart from ordering")
    return 1 if found else 0


if __name__ == "__main__":
    sys.exit(main(*sys.argv[1:3]))
