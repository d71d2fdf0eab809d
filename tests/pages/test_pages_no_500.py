"""No request of any shape answers 500 on the pages, their exports, the feeds, the share-link
pages and the statistics (issue 36, requirement 5): what tests/test_no_500.py and Schemathesis
(tests/docs/test_schemathesis.py) do for the API, for the addresses the OpenAPI document does
not describe. Any path segment, query, method and header a client can send gets the normal
answer or a 4xx, and changes nothing."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any
from urllib.parse import quote

from flask.testing import FlaskClient
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.support.api import Account, Api

FUZZ = settings(
    max_examples=80, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)

#: Text a client can put in a path segment or a query value (any Unicode but surrogates),
#: weighted towards what parsers and routers trip over.
TEXT = st.one_of(
    st.sampled_from(
        [
            "",
            ".",
            "..",
            "%",
            "%2F",
            "%00",
            "/",
            "//",
            "a/b",
            "ä",
            "\u0301",
            "x" * 300,
            "0",
            "-1",
            "1e9",
            "9" * 30,
            "²",
            "١",
            "true",
            "null",
            "[]",
            "{}",
            "<script>",
            "' OR 1=1",
            "\\",
        ]
    ),  # fmt: skip
    st.text(st.characters(exclude_categories=("Cs",)), max_size=40),
)
#: Header values a client can send (latin-1, no CR/LF).
HEADER = st.one_of(
    st.sampled_from(
        [
            "",
            "*",
            "*/*",
            "text/html;q=0",
            "application/x-bibtex",
            "bytes=0-1",
            "bytes=-0",
            '"abc"',
            'W/"x"',
            "de-DE,en;q=0.5",
            "xx;q=abc",
            "Thu, 01 Jan 1970 00:00:00 GMT",
        ]
    ),  # fmt: skip
    st.text(st.characters(min_codepoint=0x20, max_codepoint=0xFF), max_size=60),
)
HOSTS = st.one_of(
    st.sampled_from(["localhost", "a" * 64 + ".example", "[::1]", "[::1", "ex ample", "", "é.x"]),
    st.text(st.characters(min_codepoint=0x21, max_codepoint=0x7E), max_size=70),
)
QUERY_NAMES = ["lang", "q", "page", "cursor", "folders_after", "path", "from", "until",
               "granularity", "sort", "verb", "x"]  # fmt: skip
ADDRESSES = [
    "/",
    "/records/{record}",
    "/records/{record}/export/{text}",
    "/records/{record}/preview",
    "/records/{text}",
    "/browse/",
    "/browse/{text}",
    "/browse/{folder}/{text}",
    "/search",
    "/s/{secret}",
    "/s/{text}",
    "/api/shared/{secret}",
    "/api/shared/{secret}/files/{record}/download",
    "/api/shared/{secret}/files.zip",
    "/sitemap.xml",
    "/sitemap-{text}.xml",
    "/robots.txt",
    "/api/public/feed.atom",
    "/api/public/podcast.rss",
    "/api/public/files/{record}/stats",
    "/api/files/{record}/stats",
    "/api/stats",
    "/static/pages/{text}",
]
EXPORTS = ["bibtex", "ris", "csl-json", "datacite", "dc"]


def seeded(api: Api) -> dict[str, Any]:
    """A released, an embargoed and an unreleased record in folders, a link to one and a
    kit, made once per test (the app lives as long as the test)."""
    if not hasattr(api, "_pages_fuzz"):
        owner = api.account("owner@example.org", admin=True)
        embargo = (datetime.now(UTC) + timedelta(days=30)).date().isoformat()
        records = [
            api.create(owner, "a.pdf", path="presse/2026", titel="Bericht", autoren="Muster, E."),
            api.create(owner, "b.csv", b"a,b\n1,2\n", path="presse/2026", sperrfrist=embargo),
            api.create(owner, "c.txt", b"text\n", path="intern", freigabe="false"),
        ]
        expires = (datetime.now(UTC) + timedelta(days=3)).isoformat()
        link = api.client.post(
            f"/api/files/{records[1]['id']}/links",
            json={"expires_at": expires},
            headers=owner.auth,
        ).get_json()
        kit = api.client.post(
            "/api/links", json={"path": "presse", "expires_at": expires}, headers=owner.auth
        ).get_json()
        api._pages_fuzz = {
            "owner": owner,
            "records": [r["id"] for r in records],
            "secrets": [x["url"].rsplit("/s/", 1)[1] for x in (link, kit)],
        }
    return api._pages_fuzz


def state(api: Api, owner: Account) -> list[Any]:
    """What a request must not change: every record as its owner reads it."""
    rows = api.get("/api/files", owner, query_string={"per_page": 100}).get_json()["data"]
    return sorted((r["id"], r["titel"], r["freigabe"], r["path"]) for r in rows)


@given(
    address=st.sampled_from(ADDRESSES),
    text=TEXT,
    export=st.sampled_from(EXPORTS),
    which=st.integers(0, 2),
    method=st.sampled_from(["GET", "HEAD", "POST", "PUT", "DELETE", "OPTIONS", "PATCH"]),
    query=st.lists(st.tuples(st.sampled_from(QUERY_NAMES), TEXT), max_size=4),
    headers=st.dictionaries(
        st.sampled_from(
            [
                "Accept",
                "Accept-Language",
                "If-None-Match",
                "If-Modified-Since",
                "Range",
                "If-Range",
                "Authorization",
                "Cookie",
                "X-Forwarded-For",
                "User-Agent",
            ]
        ),  # fmt: skip
        HEADER,
        max_size=4,
    ),
    host=st.one_of(st.none(), HOSTS),
    token=st.booleans(),
)
@FUZZ
def test_no_request_to_a_page_answers_500(
    api: Api,
    address: str,
    text: str,
    export: str,
    which: int,
    method: str,
    query: list[tuple[str, str]],
    headers: dict[str, str],
    host: str | None,
    token: bool,
):
    data = seeded(api)
    owner = data["owner"]
    before = state(api, owner)
    path = address.format(
        record=data["records"][which],
        secret=data["secrets"][which % 2],
        folder="presse",
        text=quote(export if address.endswith("export/{text}") and which == 0 else text, safe=""),
    )
    if token and "Authorization" not in headers:
        headers = {**headers, **owner.auth}
    environ = {} if host is None else {"HTTP_HOST": host}
    # A plain client: the API's contract is Schemathesis's and the validating client's; here
    # only "no 500" and "nothing changed" are asserted.
    response = FlaskClient(api.app, api.app.response_class).open(
        path,
        method=method,
        query_string=query,
        headers=headers,
        environ_overrides=environ,
        buffered=True,
    )
    assert response.status_code < 500, (method, path, query, headers, host, response.data[:300])
    assert state(api, owner) == before


MONTHS = st.one_of(
    st.sampled_from(["2026-11", "0-1", "2026-13", "2026-00", "9999-12", "0001-01", "2026-1-1",
                     "-2026-11", "２０２６-１１", "2026-١١", "", "2026", "x-y", "2026-11 "]),
    st.text(st.characters(exclude_categories=("Cs",), exclude_characters="\x00"), max_size=20),
)  # fmt: skip


@given(
    month=MONTHS,
    output=st.sampled_from([None, "-", "{tmp}/report.csv", "{tmp}/no/such/dir/r.csv", "{tmp}"]),
)
@FUZZ
def test_any_stats_export_option_is_a_report_or_a_clear_refusal(
    api: Api, tmp_path_factory: Any, month: str, output: str | None
):
    """`flask stats export`: a report (exit 0) or one line of click's naming what is wrong
    (the option: exit 2; a file it cannot write: exit 1), never a traceback."""
    seeded(api)
    tmp = tmp_path_factory.mktemp("export")
    args = ["stats", "export", "--month", month]
    if output is not None:
        args += ["-o", output.format(tmp=tmp)]
    result = api.app.test_cli_runner().invoke(args=args)
    if result.exit_code == 0:
        assert result.exception is None
        assert result.output.startswith("Item,Title,Metric_Type,Month,Count") or output not in (
            None,
            "-",
        )
    else:
        assert isinstance(result.exception, SystemExit), (args, result.exception)
        assert result.exit_code in (1, 2), (args, result.output)
        assert "Error: " in result.output and "Traceback" not in result.output
        if result.exit_code == 2:
            assert "--month" in result.output
