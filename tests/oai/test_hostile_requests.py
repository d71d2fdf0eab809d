"""No OAI-PMH request is a 500 (issue 21 item 6): dates at the end of the calendar, forged
resumption tokens, and Hypothesis over every argument and token shape."""

from __future__ import annotations

import base64
import json
import string
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from lxml import etree

from app.oai import routes as oai_routes
from tests.files.test_list import insert_rows
from tests.oai.test_oai import LONG_AGO, NS, error_code, oai
from tests.support.api import Account, Api

OAI = "{http://www.openarchives.org/OAI/2.0/}"
ERRORS = {
    "badVerb",
    "badArgument",
    "cannotDisseminateFormat",
    "idDoesNotExist",
    "noRecordsMatch",
    "badResumptionToken",
    "noSetHierarchy",
    "noMetadataFormats",
}


def token(state: Any) -> str:
    return base64.urlsafe_b64encode(json.dumps(state).encode()).decode()


def valid_state(**changes: Any) -> dict[str, Any]:
    state = {
        "verb": "ListIdentifiers",
        "after": ["2019-01-01T00:00:00+00:00", "00000000-0000-0000-0000-000000000000"],
        "cursor": 1,
        "size": 3,
        "expires": "2999-01-01T00:00:00+00:00",
    }
    return {**state, **changes}


def identifiers(root: Any) -> list[str]:
    return [e.text for e in root.iterfind(".//oai:header/oai:identifier", NS)]


@pytest.mark.parametrize("until", ["9999-12-31", "9999-12-31T23:59:59Z"])
def test_until_the_end_of_the_calendar_bounds_nothing(api: Api, alice: Account, until: str):
    (record_id,) = insert_rows(api, alice, [{"created_at": LONG_AGO}])
    expected = [f"oai:file-repository.local:{record_id}"]
    root = oai(api, verb="ListIdentifiers", metadataPrefix="oai_dc", until=until)
    assert identifiers(root) == expected
    in_token = oai(api, verb="ListIdentifiers", resumptionToken=token(valid_state(until=until)))
    assert identifiers(in_token) == expected


@pytest.mark.parametrize(
    "state",
    [
        valid_state(after=["2019-01-01T00:00:00+00:00", 12345]),
        valid_state(after=["2019-01-01T00:00:00+00:00", None]),
        valid_state(after=[12345, "00000000-0000-0000-0000-000000000000"]),
        valid_state(after=["0001-01-01T00:00:00+01:00", "00000000-0000-0000-0000-000000000000"]),
        valid_state(after=["2019-01-01T00:00:00+00:00"]),
        valid_state(expires="9999-12-31T23:59:59-01:00"),
        valid_state(cursor=True),
        valid_state(size=-1),
        valid_state(until="tomorrow"),
        valid_state(set=["a"]),
        valid_state(set="bad set"),
        {"verb": "ListSets", "after": 7, "cursor": 0, "expires": "2999-01-01T00:00:00+00:00"},
        {"verb": "ListSets", "after": "a", "cursor": "0", "expires": "2999-01-01T00:00:00+00:00"},
        [valid_state()],
    ],
)
def test_forged_tokens_are_bad_resumption_tokens(api: Api, alice: Account, state: Any):
    insert_rows(api, alice, [{"created_at": LONG_AGO, "path": "a"}])
    verb = state["verb"] if isinstance(state, dict) else "ListIdentifiers"
    root = oai(api, verb=verb, resumptionToken=token(state))
    assert error_code(root) == "badResumptionToken"


@pytest.mark.parametrize("verb", ["ListRecords", "ListSets"])
def test_a_token_nested_2000_deep_is_a_bad_resumption_token(api: Api, verb: str):
    nested = base64.urlsafe_b64encode(b"[" * 2000 + b"]" * 2000).decode()
    assert error_code(oai(api, verb=verb, resumptionToken=nested)) == "badResumptionToken"
    object_nested = base64.urlsafe_b64encode(b'{"a":' * 2000 + b"1" + b"}" * 2000).decode()
    assert error_code(oai(api, verb=verb, resumptionToken=object_nested)) == "badResumptionToken"


# --- Hypothesis over every argument ----------------------------------------------------

json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=30),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=8), inner),
    max_leaves=8,
)
moments = st.sampled_from(
    [
        "2020-01-01",
        "9999-12-31",
        "0001-01-01",
        "2020-01-01T00:00:00Z",
        "9999-12-31T23:59:59Z",
        "0001-01-01T00:00:00+01:00",
        "9999-12-31T23:59:59-01:00",
        "2019-01-01T00:00:00+00:00",
        "2020-13-40",
        "",
    ]
)
token_states = st.fixed_dictionaries(
    {
        "verb": st.sampled_from(["ListSets", "ListIdentifiers", "ListRecords", "Identify"]),
        "cursor": st.integers(-1, 10**6) | json_values,
        "expires": moments | json_values,
    },
    optional={
        "after": st.tuples(moments | json_values, st.uuids().map(str) | json_values).map(list)
        | st.text(alphabet="ab/-.", max_size=8)
        | json_values,
        "size": st.integers(-1, 10**6) | json_values,
        "from": moments | json_values,
        "until": moments | json_values,
        "set": st.sampled_from(["a", "a:b", "bad set", ":"]) | json_values,
    },
)
tokens = (
    token_states.map(token)
    | json_values.map(token)
    | st.text(alphabet=string.ascii_letters + string.digits + "-_=", max_size=60)
    | st.text(max_size=20)
)
arguments = st.fixed_dictionaries(
    {"verb": st.sampled_from([*oai_routes.VERBS, "Nonsense", ""])},
    optional={
        "identifier": st.sampled_from(
            [
                "oai:file-repository.local:00000000-0000-0000-0000-000000000000",
                "oai:file-repository.local:x",
                "oai:elsewhere:00000000-0000-0000-0000-000000000000",
            ]
        )
        | st.text(max_size=20),
        "metadataPrefix": st.sampled_from(["oai_dc", "marc21"]) | st.text(max_size=8),
        "from": moments | st.text(max_size=20),
        "until": moments | st.text(max_size=20),
        "set": st.sampled_from(["a", "a:b", "a-b", "bad set", ""]) | st.text(max_size=10),
        "resumptionToken": tokens,
        "extra": st.text(max_size=5),
    },
)


def assert_valid_answer(response: Any) -> None:
    assert response.status_code == 200
    assert response.mimetype == "text/xml"
    root = etree.fromstring(response.data)
    assert root.tag == f"{OAI}OAI-PMH"
    assert [child.tag for child in root[:2]] == [f"{OAI}responseDate", f"{OAI}request"]
    body = root[2:]
    assert body, "an answer holds a verb's element or an error"
    if body[0].tag == f"{OAI}error":
        assert all(e.tag == f"{OAI}error" and e.get("code") in ERRORS for e in body)
    else:
        assert len(body) == 1 and body[0].tag == f"{OAI}{root[1].get('verb')}"


@settings(
    max_examples=150,
    deadline=None,
    derandomize=True,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(args=arguments, post=st.booleans())
def test_any_arguments_answer_valid_oai_pmh(api: Api, seeded: None, args: dict, post: bool):
    client = api.client
    response = client.post("/oai", data=args) if post else client.get("/oai", query_string=args)
    assert_valid_answer(response)


@pytest.fixture
def seeded(api: Api, alice: Account, monkeypatch: pytest.MonkeyPatch) -> None:
    """A few released records and a tombstone, two to a page, so tokens are followed."""
    monkeypatch.setattr(oai_routes, "PAGE_SIZE", 2)
    ids = insert_rows(
        api,
        alice,
        [{"created_at": LONG_AGO, "path": path} for path in ("a", "a/b", "a-b", "c/d/e")],
    )
    api.set_columns(ids[0], freigabe=False)


def test_every_issued_token_is_followed_to_the_end(api: Api, seeded: None):
    for verb, extra in (
        ("ListSets", {}),
        ("ListIdentifiers", {"metadataPrefix": "oai_dc"}),
        ("ListRecords", {"metadataPrefix": "oai_dc", "until": "9999-12-31"}),
    ):
        root, pages = oai(api, verb=verb, **extra), 1
        while (found := root.find(".//oai:resumptionToken", NS)) is not None and found.text:
            root, pages = oai(api, verb=verb, resumptionToken=found.text), pages + 1
        assert error_code(root) is None and pages >= 2, verb
