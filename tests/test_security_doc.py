"""docs/security.md stays true: every test it cites exists."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def test_every_cited_test_exists():
    text = (ROOT / "docs" / "security.md").read_text()
    cited = re.findall(r"`(tests/[\w/]+\.py)(?:::(\w+))?`", text)
    assert len(cited) >= 15
    for path, name in cited:
        source = ROOT / path
        assert source.is_file(), path
        if name:
            assert re.search(rf"^(async )?def {name}\(", source.read_text(), re.M), (
                f"{path}::{name}"
            )
