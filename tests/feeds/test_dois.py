"""The Atom feed names a record's DOI (issue 40): a `rel="related"` link to its resolver
address beside the landing page and the enclosure, and the feed's ETag changes with it."""

from __future__ import annotations

from typing import Any

from tests.feeds.test_feeds import parse
from tests.pages.test_dois import DATACITE, give_doi
from tests.support.api import Account, Api

DOI = "10.5072/fr-feed-0001"


def related(feed: Any, record_id: str) -> list[str]:
    (entry,) = [entry for entry in feed.entries if entry.id == f"urn:uuid:{record_id}"]
    return [link.href for link in entry.links if link.rel == "related"]


def test_an_atom_entry_links_its_doi(api: Api, alice: Account, app: Any):
    with_doi = api.create(alice, "a.pdf", titel="Mit DOI")
    without = api.create(alice, "b.pdf", titel="Ohne DOI")
    give_doi(api, with_doi["id"], DOI)
    before, feed = parse(api, "/api/public/feed.atom")
    assert related(feed, with_doi["id"]) == []  # DOIs off
    app.config.update(DATACITE)
    response, feed = parse(api, "/api/public/feed.atom")
    assert not feed.bozo
    assert related(feed, with_doi["id"]) == [f"https://doi.org/{DOI}"]
    assert related(feed, without["id"]) == []
    (entry,) = [entry for entry in feed.entries if entry.id == f"urn:uuid:{with_doi['id']}"]
    assert [link.rel for link in entry.links] == ["alternate", "enclosure", "related"]
    assert response.headers["ETag"] != before.headers["ETag"]
    revalidated = api.client.get(
        "/api/public/feed.atom", headers={"If-None-Match": response.headers["ETag"]}
    )
    assert revalidated.status_code == 304
