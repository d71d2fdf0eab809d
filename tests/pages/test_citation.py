"""The Cite box's own compact CSL style (app/pages/citation.csl) against the Harvard style
citeproc-py ships, which it stands in for: valid CSL 1.0, and the same citation, markup
included, for every shape of record in both page languages (without authors, the title once,
as CSL says and citeproc-py does not)."""

from __future__ import annotations

import itertools
from importlib import metadata
from pathlib import Path

import citeproc
import pytest
from citeproc import CitationStylesStyle

from app.pages import citation

HARVARD = Path(citeproc.STYLES_PATH) / "harvard-cite-them-right.csl"
AUTHORS = [
    [],
    [{"family": "Muster", "given": "Erika"}],
    [{"family": "Muster", "given": "Erika"}, {"family": "Beispiel", "given": "Max"}],
    [
        {"family": "van Beek", "given": "Anna Maria"},
        {"literal": "Statistisches Amt & <Partner>"},
        {"family": "Ölmann", "given": "J.-P."},
    ],
    [{"family": f"Autor{index}", "given": "Eva"} for index in range(5)],
    [{"literal": "Bundesamt für Statistik"}],
]
TITLES = ["Arbeitsmarkt 2026", "Über <b>\"Löhne\"</b> & 'Preise'? {x} \ue000"]
TYPES = ["report", "dataset", "song", "motion_picture", "graphic"]
DOIS = [None, "10.5072/fr-7k2m-9q4d"]
#: A place in a series (issue 49): title and number, or a series without numbers.
SERIES = [None, ("IAB-Forschungsbericht", "7/2026"), ('Reihe <&> "Daten"', None)]


def item(
    authors: list[dict[str, str]],
    kind: str,
    title: str,
    doi: str | None = None,
    series: tuple[str, str | None] | None = None,
) -> dict[str, object]:
    """A record's CSL-JSON item as app.pages.exports.csl_item writes it (with its DOI and
    series where it has them)."""
    value: dict[str, object] = {
        "id": "4b3f2c4e-0000-4000-8000-000000000001",
        "type": kind,
        "title": title,
        "issued": {"date-parts": [[2026, 11, 26]]},
        "publisher": "Forschungsdaten <Repo>",
        "URL": "https://repo.example/records/4b3f2c4e-0000-4000-8000-000000000001",
        "abstract": "Ein Bericht.",
        "keyword": "Arbeit, Löhne",
    }
    if authors:
        value["author"] = authors
    if doi:
        value["DOI"] = doi
    if series is not None:
        value["collection-title"] = series[0]
        if kind == "report":
            value["genre"] = series[0]
        if series[1]:
            value["collection-number"] = series[1]
            if kind == "report":
                value["number"] = series[1]
    return value


@pytest.mark.parametrize("locale", sorted(citation.LOCALES.values()))
def test_the_style_is_valid_csl(locale: str):
    # citeproc-py checks it against the CSL 1.0 RelaxNG schema it ships (raises if not).
    CitationStylesStyle(str(citation.STYLE), locale=locale, validate=True)


def test_every_record_is_cited_as_the_harvard_style_cites_it(monkeypatch):
    cases = [
        *itertools.product(range(len(AUTHORS)), TYPES, TITLES, DOIS, citation.LOCALES, [None]),
        *itertools.product(range(3), TYPES, TITLES[:1], DOIS[:1], citation.LOCALES, SERIES[1:]),
    ]
    ours = {
        (index, kind, title, doi, language, series): citation.formatted_citation(
            item(AUTHORS[index], kind, title, doi, series), language
        )
        for index, kind, title, doi, language, series in cases
    }
    monkeypatch.setattr(citation, "STYLE", HARVARD)
    citation._style.cache_clear()
    try:
        for (index, kind, title, doi, language, series), formatted in ours.items():
            cited = item(AUTHORS[index], kind, title, doi, series)
            expected = citation.formatted_citation(cited, language)
            if not AUTHORS[index]:
                # The title stands in for the authors, and CSL suppresses a substituted
                # variable in the rest of the entry; citeproc-py prints it again.
                cited_title = expected.split(" (2026) ")[0]
                expected = expected.replace(f" (2026) {cited_title}.", " (2026).", 1)
            assert formatted == expected, (index, kind, title, doi, language, series)
    finally:
        citation._style.cache_clear()
    # With a DOI, the DOI's address is the one cited (the page's address is left out).
    cited = ours[(1, "dataset", TITLES[0], DOIS[1], "en", None)]
    assert cited.endswith("Available at: https://doi.org/10.5072/fr-7k2m-9q4d.")
    assert "repo.example" not in cited
    assert "<i>Arbeitsmarkt 2026</i>" in ours[(2, "report", TITLES[0], None, "de", None)]
    assert ours[(4, "report", TITLES[0], None, "en", None)].startswith(
        "Autor0, E. <i>et al.</i> (2026)"
    )
    assert ours[(0, "report", TITLES[0], None, "de", None)].startswith(
        "<i>Arbeitsmarkt 2026</i> (2026). Forschungsdaten &lt;Repo&gt;. Verfügbar unter: "
    )
    # A report's series is its genre and number; anything else's follows the publisher.
    series = SERIES[1]
    assert ours[(1, "report", TITLES[0], None, "de", series)].startswith(
        "Muster, E. (2026) <i>Arbeitsmarkt 2026</i>. IAB-Forschungsbericht 7/2026. "
        "Forschungsdaten &lt;Repo&gt;. Verfügbar unter: "
    )
    assert (
        "Forschungsdaten &lt;Repo&gt; (IAB-Forschungsbericht, 7/2026). Available"
        in (ours[(1, "dataset", TITLES[0], None, "en", series)])
    )


def test_a_new_style_changes_every_page_etag(tmp_path):
    # The pages' ETags end in the layout's digest, which takes in the style file.
    from app.pages import routes

    style = tmp_path / "citation.csl"
    style.write_bytes(citation.STYLE.read_bytes())
    before = routes._digest_of_files(routes.HERE / "templates", style)
    style.write_bytes(citation.STYLE.read_bytes().replace(b'prefix="("', b'prefix="["'))
    assert routes._digest_of_files(routes.HERE / "templates", style) != before
    # ... and the digest the pages use takes in the style, the code and the libraries that
    # write pages and exports.
    assert citation.STYLE in routes.LAYOUT_INPUTS
    for module in ("records.py", "exports.py", "citation.py"):
        assert routes.HERE / module in routes.LAYOUT_INPUTS
    assert routes.HERE.parent / "oai" / "xml.py" in routes.LAYOUT_INPUTS
    assert routes.LAYOUT_DIGEST == routes._digest_of_files(*routes.LAYOUT_INPUTS) + "".join(
        metadata.version(name) for name in routes.LAYOUT_LIBRARIES
    )
    assert {"citeproc-py", "bibtexparser", "rispy", "datacite"} <= set(routes.LAYOUT_LIBRARIES)
