"""ListSets is bounded (issue 21): pages with resumption tokens read from `file_path_counts`,
and tombstones no longer keep folders in the list."""

from __future__ import annotations

import random
from typing import Any

import pytest
from sickle import Sickle

from app.oai import routes as oai_routes
from app.oai.harvest import parents
from tests.files.test_list import insert_rows
from tests.oai.test_oai import LONG_AGO, NS, error_code, ident, oai
from tests.support.api import Account, Api

# Folders whose names extend one another with characters that sort before "/" ("a-b", "a.c"
# between "a" and "a/..."), so a folder's paths are not next to each other in index order.
TRICKY = ["a", "a-b", "a/c", "a.x/y", "a/c-d/e", "a/c/e", "b/a", "a-b/c", "z", "a/c/e/f/g"]


def expected_sets(paths: list[str]) -> set[str]:
    return {folder.replace("/", ":") for path in paths for folder in parents(path)}


def list_sets(api: Api) -> tuple[list[str], list[Any]]:
    """Every setSpec over all pages, and each page's root."""
    specs, pages = [], []
    root = oai(api, verb="ListSets")
    while True:
        pages.append(root)
        specs += [e.text for e in root.iterfind(".//oai:set/oai:setSpec", NS)]
        token = root.find(".//oai:resumptionToken", NS)
        if token is None or not token.text:
            return specs, pages
        root = oai(api, verb="ListSets", resumptionToken=token.text)


@pytest.mark.parametrize("page_size", [1, 2, 200])
def test_sets_come_in_pages_each_once(
    api: Api, alice: Account, monkeypatch: pytest.MonkeyPatch, page_size: int
):
    monkeypatch.setattr(oai_routes, "PAGE_SIZE", page_size)
    rng = random.Random(21)
    generated = [
        "/".join(rng.choice(["a", "a-b", "a.c", "b", "b_1"]) for _ in range(rng.randint(1, 4)))
        for _ in range(40)
    ]
    paths = TRICKY + generated
    unreleased = insert_rows(api, alice, [{"created_at": LONG_AGO, "path": "intern/x"}])
    api.set_columns(unreleased[0], freigabe=False)
    insert_rows(api, alice, [{"created_at": LONG_AGO, "path": path} for path in paths])

    specs, pages = list_sets(api)
    assert sorted(specs) == sorted(expected_sets(paths))  # each set once, none unreleased
    if page_size == 200:
        assert len(pages) == 1 and pages[0].find(".//oai:resumptionToken", NS) is None
    else:
        assert len(pages) > 1
        cursors = [int(p.find(".//oai:resumptionToken", NS).get("cursor")) for p in pages]
        assert cursors[0] == 0 and cursors == sorted(cursors)
        assert pages[-1].find(".//oai:resumptionToken", NS).text is None
        for page in pages[:-1]:
            assert page.find(".//oai:resumptionToken", NS).get("expirationDate")


def test_a_real_harvester_follows_the_set_pages(
    api: Api, alice: Account, server: str, monkeypatch: pytest.MonkeyPatch
):
    monkeypatch.setattr(oai_routes, "PAGE_SIZE", 2)
    insert_rows(api, alice, [{"created_at": LONG_AGO, "path": path} for path in TRICKY])
    specs = [s.setSpec for s in Sickle(server).ListSets()]
    assert sorted(specs) == sorted(expected_sets(TRICKY))


def test_a_page_of_deep_paths_stays_bounded(
    api: Api, alice: Account, monkeypatch: pytest.MonkeyPatch
):
    """Paths 127 segments deep (the longest a 255-character path can be) make at most one
    path's worth of sets more than a page."""
    monkeypatch.setattr(oai_routes, "PAGE_SIZE", 20)
    deep = ["/".join(f"{i}{j % 10}"[-2:] for j in range(85)) for i in range(6)]
    insert_rows(api, alice, [{"created_at": LONG_AGO, "path": path} for path in deep])
    specs, pages = list_sets(api)
    assert sorted(specs) == sorted(expected_sets(deep))
    assert all(len(page.findall(".//oai:set", NS)) <= 20 + 85 for page in pages)
    assert len(pages) >= 5


def test_deleted_records_leave_the_sets_but_stay_harvestable(api: Api, alice: Account):
    kept = api.create(alice, "k.pdf", path="reports/2025")
    gone = [api.create(alice, f"{i}.pdf", path=f"bloat/{i}/x/y") for i in range(3)]
    hidden = api.create(alice, "h.pdf", path="hidden/z")
    for record in gone:
        assert api.delete(record["id"], alice).status_code == 204
    assert api.patch(hidden["id"], alice, {"freigabe": False}).status_code == 200

    specs, _ = list_sets(api)
    assert sorted(specs) == ["reports", "reports:2025"]
    root = oai(api, verb="ListIdentifiers", metadataPrefix="oai_dc", set="bloat")
    headers = root.findall(".//oai:header", NS)
    assert {h.findtext("oai:identifier", namespaces=NS) for h in headers} == {
        ident(r["id"]) for r in gone
    }
    assert all(h.get("status") == "deleted" for h in headers)
    assert kept["id"] not in str(headers)


def test_no_released_path_means_no_set_hierarchy(api: Api, alice: Account):
    gone = api.create(alice, "g.pdf", path="bloat/1")
    assert api.delete(gone["id"], alice).status_code == 204
    assert error_code(oai(api, verb="ListSets")) == "noSetHierarchy"
