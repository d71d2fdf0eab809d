"""The documents stand on their own: every relative link in README.md and docs/*.md leads to a
file of this repository (and to a heading there, when it names one), never beside it."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
DOCUMENTS = sorted([ROOT / "README.md", *(ROOT / "docs").glob("*.md")])

_FENCED = re.compile(r"^```.*?^```$", re.S | re.M)
_INLINE_CODE = re.compile(r"`[^`\n]*`")
_LINK = re.compile(r"\[[^\]\n]*\]\(\s*<?([^)\s>]+)>?(?:\s+\"[^\"]*\")?\s*\)")
_REFERENCE = re.compile(r"^\s*\[[^\]\n]+\]:\s*<?(\S+?)>?(?:\s|$)", re.M)
_SCHEME = re.compile(r"^[a-z][a-z0-9+.-]*:", re.I)


def links(text: str) -> list[str]:
    prose = _INLINE_CODE.sub("", _FENCED.sub("", text))
    return _LINK.findall(prose) + _REFERENCE.findall(prose)


def anchors(markdown: str) -> set[str]:
    """Heading anchors as GitHub makes them: lowercase, punctuation dropped, spaces to '-'."""
    found = set()
    for heading in re.findall(r"^#{1,6}\s+(.+?)\s*#*\s*$", _FENCED.sub("", markdown), re.M):
        text = re.sub(r"[`*_]|\[([^\]]*)\]\([^)]*\)", r"\1", heading).strip().lower()
        found.add(re.sub(r"[^\w\- ]", "", text).replace(" ", "-"))
    return found


def broken_links(document: Path, text: str | None = None) -> list[str]:
    broken = []
    for link in links(document.read_text() if text is None else text):
        if _SCHEME.match(link) or link.startswith("//"):
            continue  # a web address, not a file of the repository
        target_text, _, anchor = link.partition("#")
        target = (document.parent / target_text).resolve() if target_text else document
        if not target.is_relative_to(ROOT):
            broken.append(f"{link}: outside the repository")
        elif not target.exists():
            broken.append(f"{link}: no such file")
        elif anchor and target.suffix == ".md" and anchor not in anchors(target.read_text()):
            broken.append(f"{link}: no heading #{anchor} in {target.relative_to(ROOT)}")
    return broken


@pytest.mark.parametrize("document", DOCUMENTS, ids=lambda path: str(path.relative_to(ROOT)))
def test_every_relative_link_resolves_in_the_repository(document: Path):
    assert broken_links(document) == []


def test_the_checker_finds_what_would_break():
    text = (
        "[spec](../shared/spec/DECISIONS.md) [gone](missing.md) [ok](security.md) "
        "[heading](security.md#no-such-heading) [web](https://tus.io/) `[code](x.md)`\n"
        "[up]: ../../outside.md\n"
    )
    found = [line.split(":")[0] for line in broken_links(ROOT / "docs" / "new.md", text)]
    assert found == [
        "../shared/spec/DECISIONS.md",
        "missing.md",
        "security.md#no-such-heading",
        "../../outside.md",
    ]
