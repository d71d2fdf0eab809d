"""Every tus header with any value a client can send: a clear 4xx or the normal answer,
never a 500, and every answer as the API document says (the validating client)."""

from __future__ import annotations

import base64

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.support.api import Account, Api

TUS = {"Tus-Resumable": "1.0.0"}
OFFSET_TYPE = "application/offset+octet-stream"
BODY = b"Ein Bericht.\n" * 8

# What a client can put in a header value (latin-1, no CR/LF), weighted towards what byte
# counts and lists trip over: digits that `str.isdigit()` takes and `int()` does not, signs,
# separators, base64's alphabet.
HEADER_TEXT = st.one_of(
    st.text(alphabet="0123456789²³¹", min_size=1, max_size=20),
    st.text(
        alphabet=st.one_of(
            st.sampled_from("0123456789-+=,;. */²³¹AZaz/+=sha1sha256"),
            st.characters(min_codepoint=0x20, max_codepoint=0xFF),
        ),
        max_size=40,
    ),
)

FUZZ = settings(
    max_examples=15, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)


def _metadata(pairs: dict[str, str]) -> str:
    return ",".join(f"{k} {base64.b64encode(v.encode()).decode()}" for k, v in pairs.items())


def _post(api: Api, account: Account, **headers: str):
    return api.client.post(
        "/api/uploads",
        headers={
            **TUS,
            **account.auth,
            "Upload-Length": str(len(BODY)),
            "Upload-Metadata": _metadata({"filename": "bericht.txt"}),
            **headers,
        },
    )


@pytest.mark.parametrize(
    "name",
    [
        "Upload-Length",
        "Upload-Metadata",
        "Tus-Resumable",
        "Upload-Defer-Length",
        "Upload-Concat",
        "Upload-Checksum",
        "Content-Type",
    ],
)
@given(value=HEADER_TEXT)
@FUZZ
def test_any_creation_header_is_answered_without_500(
    api: Api, alice: Account, name: str, value: str
):
    response = _post(api, alice, **{name: value})
    assert response.status_code < 500, (name, value, response.data)


@pytest.mark.parametrize(
    "name", ["Upload-Offset", "Tus-Resumable", "Upload-Checksum", "Content-Type"]
)
@given(value=HEADER_TEXT, method=st.sampled_from(["PATCH", "HEAD", "DELETE"]))
@FUZZ
def test_any_header_of_an_upload_is_answered_without_500(
    api: Api, alice: Account, name: str, value: str, method: str
):
    url = _post(api, alice).headers["Location"]
    headers = {**TUS, **alice.auth, "Upload-Offset": "0", "Content-Type": OFFSET_TYPE}
    headers[name] = value
    response = api.client.open(url, method=method, data=BODY[:10], headers=headers)
    assert response.status_code < 500, (method, name, value, response.data)
    # Each example's upload goes, or they would reach the limit of unfinished ones.
    api.client.delete(url, headers={**TUS, **alice.auth})


METADATA_KEYS = st.sampled_from(
    ["filename", "name", "titel", "path", "sperrfrist", "freigabe", "beschreibung", "autoren"]
)


#: Keys as tus allows them: printable ASCII without spaces and commas.
OTHER_KEYS = st.text(
    alphabet=st.characters(min_codepoint=0x21, max_codepoint=0x7E, exclude_characters=","),
    min_size=1,
    max_size=8,
)


@given(pairs=st.dictionaries(METADATA_KEYS | OTHER_KEYS, st.text(max_size=60), max_size=6))
@FUZZ
def test_any_metadata_ends_in_a_record_or_a_clear_refusal(
    api: Api, alice: Account, pairs: dict[str, str]
):
    """Any Unicode in any field, through creation with upload to completion."""
    response = api.client.post(
        "/api/uploads",
        data=BODY,
        headers={
            **TUS,
            **alice.auth,
            "Upload-Length": str(len(BODY)),
            "Upload-Metadata": _metadata(pairs),
        },
        content_type=OFFSET_TYPE,
    )
    assert response.status_code in (201, 400, 422), (pairs, response.data)
