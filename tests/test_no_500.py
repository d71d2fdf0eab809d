"""No input gives a 500: header values, date and cursor extremes, deeply nested JSON and
non-ASCII digits get a clear 4xx (or the normal answer) and change nothing."""

from __future__ import annotations

import base64
import json

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.support import samples
from tests.support.api import Account, Api

# Characters a client can put in a header value (latin-1, no CR/LF), weighted towards the
# ones parsers trip over: digits of other scripts, separators, quotes.
HEADER_TEXT = st.text(
    alphabet=st.one_of(
        st.sampled_from("0123456789-=,;|\"' */bytesW²³¹١٢٣０１２"),
        st.characters(min_codepoint=0x20, max_codepoint=0xFF),
    ),
    max_size=40,
).filter(lambda value: all(ord(ch) < 256 for ch in value))

FUZZ = settings(
    max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)


def cursor_of(text: str) -> str:
    return base64.urlsafe_b64encode(text.encode()).decode().rstrip("=")


@pytest.mark.parametrize(
    "value",
    ["²|x", "١|secret", "１|secret", "1|", "|x", "99999999999999999999|x", "1|\x85", "Basic x"],
)
def test_malformed_bearer_values_are_401(api: Api, value: str):
    response = api.client.get("/api/files", headers={"Authorization": f"Bearer {value}"})
    assert response.status_code == 401
    assert response.get_json() == {"message": "Unauthenticated."}


@given(value=HEADER_TEXT)
@FUZZ
def test_any_authorization_header_is_401_not_500(api: Api, value: str):
    response = api.client.get("/api/files", headers={"Authorization": value})
    assert response.status_code == 401


@pytest.mark.parametrize(
    "since",
    [
        "0001-01-01T00:00+01:00",
        "9999-12-31T23:59-01:00",
        "0001-01-01T00:00:00+23:59",
        "9999-12-31T23:59:59.999999-23:59",
    ],
)
def test_since_beyond_the_representable_instants_is_422(api: Api, alice: Account, since: str):
    for path in ("/api/files", "/api/public/files"):
        response = api.get(path, alice, query_string={"since": since})
        assert response.status_code == 422, path
        assert list(response.get_json()["errors"]) == ["since"]


@pytest.mark.parametrize("since", ["0001-01-01", "0001-01-01T00:00Z", "9999-12-31T23:59:59Z"])
def test_since_at_the_extremes_is_answered(api: Api, alice: Account, since: str):
    api.create(alice)
    response = api.get("/api/files", alice, query_string={"since": since})
    assert response.status_code == 200
    assert response.get_json()["total"] == (0 if since.startswith("9999") else 1)


@pytest.mark.parametrize(
    "inside",
    [
        "0001-01-01T00:00:00+01:00|00000000-0000-4000-8000-000000000000",
        "9999-12-31T23:59:00-01:00|00000000-0000-4000-8000-000000000000",
        "2026-01-01T00:00:00|00000000-0000-4000-8000-000000000000",
        "2026-01-01T00:00:00+00:00|not-a-uuid",
        "\xff\xfe",
    ],
)
def test_crafted_cursors_are_422(api: Api, alice: Account, inside: str):
    for path in ("/api/files", "/api/public/files"):
        response = api.get(path, alice, query_string={"cursor": cursor_of(inside)})
        assert response.status_code == 422, path
        assert list(response.get_json()["errors"]) == ["cursor"]


@given(cursor=st.text(max_size=60), since=st.text(max_size=40))
@FUZZ
def test_any_cursor_or_since_is_answered_without_500(api: Api, cursor: str, since: str):
    for params in ({"cursor": cursor}, {"since": since}, {"cursor": cursor_of(since)}):
        response = api.client.get("/api/public/files", query_string=params)
        assert response.status_code in (200, 422), params


@pytest.mark.parametrize("depth", [50_000, 2_000])
def test_deeply_nested_json_is_a_clear_422(api: Api, alice: Account, depth: int):
    record = api.create(alice)
    nested = "[" * depth + "]" * depth
    token = api.client.post(
        "/api/tokens", data=nested, headers={"Content-Type": "application/json"}
    )
    assert token.status_code == 422
    assert "message" in token.get_json()
    patch = api.client.patch(
        f"/api/files/{record['id']}",
        data='{"titel": ' + nested + "}",
        headers={**alice.auth, "Content-Type": "application/json"},
    )
    assert patch.status_code == 422
    assert api.get(f"/api/files/{record['id']}", alice).get_json()["titel"] == record["titel"]


def test_deep_nesting_inside_an_object_is_reported_on_the_body(api: Api, alice: Account):
    record = api.create(alice)
    body = json.dumps({"titel": "x"})[:-1] + ', "x": ' + "[" * 50_000 + "]" * 50_000 + "}"
    response = api.client.patch(
        f"/api/files/{record['id']}",
        data=body,
        headers={**alice.auth, "Content-Type": "application/json"},
    )
    assert response.status_code == 422
    assert response.get_json()["errors"] == {"body": ["The request body is nested too deeply."]}


@given(range_value=HEADER_TEXT, if_range=HEADER_TEXT, if_none_match=HEADER_TEXT)
@FUZZ
def test_any_range_and_conditional_headers_get_a_proper_answer(
    api: Api, range_value: str, if_range: str, if_none_match: str
):
    if not hasattr(api, "_fuzz_record"):
        api._fuzz_record = api.create(api.account("fuzz@example.org"), data=b"0123456789\n")
    record = api._fuzz_record
    url = f"/api/public/files/{record['id']}/download"
    for headers in (
        {"Range": range_value},
        {"Range": "bytes=0-1", "If-Range": if_range},
        {"If-None-Match": if_none_match},
    ):
        response = api.client.get(url, headers=headers)
        assert response.status_code in (200, 206, 304, 416), headers
        if response.status_code == 200:
            assert response.data == b"0123456789\n"
        if response.status_code == 206:
            assert response.data and response.data in b"0123456789\n"


@pytest.mark.parametrize("suffix", [11, 12, 10**12])
def test_a_suffix_range_longer_than_the_file_serves_the_whole_file(
    api: Api, alice: Account, suffix: int
):
    record = api.create(alice, data=b"0123456789\n")
    url = f"/api/files/{record['id']}/download"
    response = api.get(url, alice, headers={"Range": f"bytes=-{suffix}"})
    assert response.status_code == 206
    assert response.headers["Content-Range"] == "bytes 0-10/11"
    assert response.data == b"0123456789\n"
    tail = api.get(url, alice, headers={"Range": "bytes=-3"})
    assert (tail.status_code, tail.data) == (206, b"89\n")
    ignored = api.get(url, alice, headers={"Range": "bytes=-0"})  # not a valid range: ignored
    assert (ignored.status_code, ignored.data) == (200, b"0123456789\n")


@pytest.mark.parametrize(
    "field,value", [("reihenfolge", "٣"), ("reihenfolge", "²"), ("sperrfrist", "٢٠٢٦-01-01")]
)
def test_non_ascii_digits_in_create_and_patch_are_422(
    api: Api, alice: Account, field: str, value: str
):
    created = api.upload(alice, [("a.pdf", samples.pdf_bytes())], **{field: value})
    assert created.status_code == 422
    assert list(created.get_json()["errors"]) == [field]
    record = api.create(alice)
    patched = api.patch(record["id"], alice, {field: value})
    assert patched.status_code == 422
    assert list(patched.get_json()["errors"]) == [field]
    assert len(api.rows()) == 1
