"""A record's page shows its links (issue 49, point 2): its own, and the inverse of those other
records state; a link to or from a record the public may not see is left out, never a dead
end."""

from __future__ import annotations

from typing import Any

from lxml import html

from tests.files.test_related_identifiers import create, dataset, link
from tests.support.api import Account, Api


def related(api: Api, record_id: str, **kwargs: Any) -> list[tuple[str, list[tuple[str, str]]]]:
    """The page's "Verknüpft" section: each heading with the (text, address) of its links."""
    response = api.client.get(f"/records/{record_id}", **kwargs)
    assert response.status_code == 200
    found: list[tuple[str, list[tuple[str, str]]]] = []
    for element in html.fromstring(response.get_data()).xpath("//section[@class='related']/dl/*"):
        if element.tag == "dt":
            found.append((element.text_content(), []))
        else:
            anchor = element.find("a")
            found[-1][1].append((anchor.text_content(), anchor.get("href")))
    return found


def test_a_report_shows_its_data_and_the_data_its_report(api: Api, alice: Account):
    data = dataset(api, alice)
    report = create(
        api,
        alice,
        titel="Arbeitsmarktbericht",
        related_identifiers=[
            link(data["id"]),
            link("10.1234/abc", "References", "DOI"),
            link("https://example.org/s", "References", "URL"),
        ],
    )
    base = "http://localhost/records/"
    assert related(api, report["id"]) == [
        ("Daten zu diesem Bericht", [("Quoten", base + data["id"])]),
        (
            "Verweist auf",
            [
                ("https://doi.org/10.1234/abc", "https://doi.org/10.1234/abc"),
                ("https://example.org/s", "https://example.org/s"),
            ],
        ),
    ]
    assert related(api, data["id"]) == [("Ergänzt", [("Arbeitsmarktbericht", base + report["id"])])]
    english = related(api, report["id"], headers={"Accept-Language": "en"})
    assert english[0][0] == "Data for this report"
    assert related(api, data["id"], query_string={"lang": "en"}) == [
        ("Supplements", [("Arbeitsmarktbericht", base + report["id"] + "?lang=en")])
    ]


def test_links_to_and_from_records_the_public_may_not_see_are_left_out(api: Api, alice: Account):
    data = dataset(api, alice)
    report = create(api, alice, titel="Bericht", related_identifiers=[link(data["id"])])
    before = api.client.get(f"/records/{report['id']}").headers["ETag"]
    assert api.patch(data["id"], alice, {"freigabe": False}).status_code == 200
    page = api.client.get(f"/records/{report['id']}", headers={"If-None-Match": before})
    assert page.status_code == 200  # what another record lends a page is in its ETag
    text = page.get_data(as_text=True)
    assert data["id"] not in text and "Quoten" not in text and 'class="related"' not in text

    draft = create(api, alice, freigabe="false", related_identifiers=[link(report["id"])])
    assert related(api, report["id"]) == []  # an unreleased record's link shows nowhere
    assert api.patch(draft["id"], alice, {"freigabe": True}).status_code == 200
    assert related(api, report["id"]) == [
        ("Ergänzt", [(draft["original_name"], f"http://localhost/records/{draft['id']}")])
    ]
    assert api.delete(draft["id"], alice).status_code == 204
    assert related(api, report["id"]) == []


def test_a_link_both_records_state_shows_once(api: Api, alice: Account):
    data = dataset(api, alice)
    report = create(api, alice, titel="Bericht", related_identifiers=[link(data["id"])])
    api.patch(data["id"], alice, {"related_identifiers": [link(report["id"], "IsSupplementTo")]})
    assert related(api, data["id"]) == [
        ("Ergänzt", [("Bericht", f"http://localhost/records/{report['id']}")])
    ]
