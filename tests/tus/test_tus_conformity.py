"""The MUST cases of the tus 1.0.0 protocol (https://tus.io/protocols/resumable-upload),
replayed from its text on both stacks, every answer checked against the API document: the
core protocol (HEAD, PATCH, OPTIONS, the version headers), the extensions the server
announces (creation, creation-with-upload, expiration, checksum, termination),
`X-HTTP-Method-Override`, and the headers of every answer under /api/uploads, the routing's
404 and 405 included."""

from __future__ import annotations

import base64
import hashlib
import uuid

import pytest

from tests.support.api import Account, Api

TUS = {"Tus-Resumable": "1.0.0"}
OFFSET_TYPE = "application/offset+octet-stream"
BODY = b"Ein Bericht, Zeile fuer Zeile.\n" * 40
METADATA = "filename " + base64.b64encode(b"bericht.txt").decode()


def create(api: Api, account: Account, length: int = len(BODY)) -> str:
    response = api.client.post(
        "/api/uploads",
        headers={**TUS, **account.auth, "Upload-Length": str(length), "Upload-Metadata": METADATA},
    )
    assert response.status_code == 201, response.data
    return response.headers["Location"]


def send(api: Api, account: Account, url: str, method: str, body: bytes = b"", **headers: str):
    return api.client.open(
        url,
        method=method,
        data=body,
        headers={**TUS, **account.auth, **headers},
        content_type=OFFSET_TYPE if body else None,
    )


def offset_of(api: Api, account: Account, url: str) -> int:
    response = send(api, account, url, "HEAD")
    assert response.status_code == 200
    return int(response.headers["Upload-Offset"])


def assert_tus_headers(response) -> None:
    """Protocol: "The Tus-Resumable header MUST be included in every request and response except for
    OPTIONS requests"; upload state must not be cached (HEAD: "MUST prevent the client
    and/or proxies from caching the response by adding the Cache-Control: no-store")."""
    assert response.headers.get("Tus-Resumable") == "1.0.0", (response.status, response.headers)
    assert response.headers.get("Cache-Control") == "no-store", response.headers


# --- core protocol ------------------------------------------------------------------------


def test_options_announces_version_and_extensions(api: Api):
    """OPTIONS: the answer "MUST contain the Tus-Version header"; the Server "MUST ignore"
    a Tus-Resumable the client sends with it, and the extensions are in Tus-Extension."""
    for headers in ({}, {"Tus-Resumable": "0.2.2"}):
        response = api.client.options("/api/uploads", headers=headers)
        assert response.status_code in (200, 204)
        assert response.headers["Tus-Version"].split(",")[0] == "1.0.0"
        announced = set(response.headers["Tus-Extension"].split(","))
        assert announced == {
            "creation",
            "creation-with-upload",
            "termination",
            "checksum",
            "expiration",
        }
        assert "sha1" in response.headers["Tus-Checksum-Algorithm"].split(",")
        assert int(response.headers["Tus-Max-Size"]) > 0
        assert_tus_headers(response)


@pytest.mark.parametrize("method", ["POST", "HEAD", "PATCH", "DELETE"])
@pytest.mark.parametrize("version", [None, "0.2.2", "2.0.0"])
def test_an_unsupported_version_is_412_with_tus_version(
    api: Api, alice: Account, method: str, version: str | None
):
    """Protocol: "If the version specified by the Client is not supported by the Server, it MUST
    respond with the 412 Precondition Failed status and MUST include the Tus-Version
    header"; the request must not be processed."""
    url = create(api, alice)
    headers = {**alice.auth, "Upload-Length": "10", "Upload-Offset": "0"}
    if version is not None:
        headers["Tus-Resumable"] = version
    target = "/api/uploads" if method == "POST" else url
    response = api.client.open(
        target, method=method, data=BODY[:10], headers=headers, content_type=OFFSET_TYPE
    )
    assert response.status_code == 412
    assert response.headers["Tus-Version"] == "1.0.0"
    assert_tus_headers(response)
    assert offset_of(api, alice, url) == 0  # neither appended nor terminated


def test_head_always_carries_offset_length_and_metadata(api: Api, alice: Account):
    """HEAD: "MUST always include the Upload-Offset header in the response ... even if the
    offset is 0, or the upload is already considered completed"; "MUST include the
    Upload-Length header" when the size is known; the Upload-Metadata of the creation "MUST"
    be in the answer; no caching."""
    url = create(api, alice)
    for sent in (0, len(BODY)):
        if sent:
            assert send(api, alice, url, "PATCH", BODY, **{"Upload-Offset": "0"}).status_code == 204
        response = send(api, alice, url, "HEAD")
        assert response.status_code == 200 and response.data == b""
        assert response.headers["Upload-Offset"] == str(sent)
        assert response.headers["Upload-Length"] == str(len(BODY))
        assert response.headers["Upload-Metadata"] == METADATA
        assert_tus_headers(response)


def test_head_of_no_upload_has_no_offset(api: Api, alice: Account):
    """Protocol: "If the resource is not found, the Server SHOULD return either the 404 Not Found,
    410 Gone or 403 Forbidden status without the Upload-Offset header"."""
    response = send(api, alice, f"/api/uploads/{uuid.uuid4()}", "HEAD")
    assert response.status_code == 404
    assert "Upload-Offset" not in response.headers
    assert_tus_headers(response)


def test_patch_appends_at_the_offset_and_answers_204_with_the_new_offset(api: Api, alice: Account):
    """PATCH: "The Server MUST acknowledge successful PATCH requests with the 204 No
    Content status. It MUST include the Upload-Offset header containing the new offset";
    expiration: Upload-Expires "MUST be included in every PATCH response if the upload is
    going to expire"."""
    url = create(api, alice)
    response = send(api, alice, url, "PATCH", BODY[:100], **{"Upload-Offset": "0"})
    assert response.status_code == 204
    assert response.headers["Upload-Offset"] == "100"
    assert response.headers["Upload-Expires"].endswith(" GMT")
    assert_tus_headers(response)
    response = send(api, alice, url, "PATCH", BODY[100:], **{"Upload-Offset": "100"})
    assert response.status_code == 204
    assert response.headers["Upload-Offset"] == str(len(BODY))


def test_an_offset_mismatch_is_409_and_changes_nothing(api: Api, alice: Account):
    """Protocol: "If the offsets do not match, the Server MUST respond with the 409 Conflict status
    without modifying the upload resource"."""
    url = create(api, alice)
    send(api, alice, url, "PATCH", BODY[:100], **{"Upload-Offset": "0"})
    for wrong in ("0", "50", "101"):
        response = send(api, alice, url, "PATCH", BODY[:10], **{"Upload-Offset": wrong})
        assert response.status_code == 409, wrong
        assert_tus_headers(response)
    assert offset_of(api, alice, url) == 100


def test_a_patch_of_another_type_is_415(api: Api, alice: Account):
    """Protocol: "All PATCH requests MUST use Content-Type: application/offset+octet-stream,
    otherwise the server SHOULD return a 415 Unsupported Media Type status"."""
    url = create(api, alice)
    response = api.client.patch(
        url,
        data=BODY,
        headers={**TUS, **alice.auth, "Upload-Offset": "0"},
        content_type="application/octet-stream",
    )
    assert response.status_code == 415
    assert_tus_headers(response)
    assert offset_of(api, alice, url) == 0


# --- extensions ---------------------------------------------------------------------------


def test_creation_answers_201_with_location_and_creation_with_upload_an_offset(
    api: Api, alice: Account
):
    """creation: "The Server MUST acknowledge a successful upload creation with the 201
    Created status. The Server MUST set the Location header"; creation-with-upload: the
    answer "MUST include the Upload-Offset header"; over Tus-Max-Size "MUST" be 413."""
    response = api.client.post(
        "/api/uploads",
        data=BODY[:100],
        headers={**TUS, **alice.auth, "Upload-Length": str(len(BODY))},
        content_type=OFFSET_TYPE,
    )
    assert response.status_code == 201
    assert response.headers["Location"].startswith("/api/uploads/")
    assert response.headers["Upload-Offset"] == "100"
    assert_tus_headers(response)
    assert offset_of(api, alice, response.headers["Location"]) == 100
    too_long = str(api.app.config["MAX_FILE_SIZE"] + 1)
    response = api.client.post(
        "/api/uploads", headers={**TUS, **alice.auth, "Upload-Length": too_long}
    )
    assert response.status_code == 413
    assert_tus_headers(response)


def test_a_checksum_mismatch_is_460_and_keeps_nothing(api: Api, alice: Account):
    """checksum: sha1 "MUST" be supported; on a mismatch "the Server MUST respond with the
    460 Checksum Mismatch status ... the Server MUST NOT append" the body; an algorithm it
    does not support is 400."""
    url = create(api, alice)
    wrong = base64.b64encode(hashlib.sha1(b"other").digest()).decode()
    response = send(api, alice, url, "PATCH", BODY, **{"Upload-Offset": "0"},
                    **{"Upload-Checksum": f"sha1 {wrong}"})  # fmt: skip
    assert response.status_code == 460
    assert_tus_headers(response)
    response = send(api, alice, url, "PATCH", BODY, **{"Upload-Offset": "0"},
                    **{"Upload-Checksum": "md5 AAAA"})  # fmt: skip
    assert response.status_code == 400
    assert offset_of(api, alice, url) == 0
    right = base64.b64encode(hashlib.sha1(BODY).digest()).decode()
    response = send(api, alice, url, "PATCH", BODY, **{"Upload-Offset": "0"},
                    **{"Upload-Checksum": f"sha1 {right}"})  # fmt: skip
    assert response.status_code == 204 and response.headers["Upload-Offset"] == str(len(BODY))


def test_termination_answers_204_and_the_upload_is_gone(api: Api, alice: Account):
    """termination: "the Server MUST respond with the 204 No Content status"; afterwards
    requests to the URL "SHOULD" be 404 or 410."""
    url = create(api, alice)
    response = send(api, alice, url, "DELETE")
    assert response.status_code == 204
    assert_tus_headers(response)
    for method in ("HEAD", "PATCH"):
        response = send(api, alice, url, method, BODY[:10], **{"Upload-Offset": "0"})
        assert response.status_code in (404, 410)
        assert_tus_headers(response)


# --- X-HTTP-Method-Override ---------------------------------------------------------------


def test_a_post_overridden_to_patch_appends(api: Api, alice: Account):
    """Protocol: "The X-HTTP-Method-Override request header MUST be a string which MUST be
    interpreted as the request's method by the Server ... The actual method of the request
    MUST be ignored" (tus-js-client's `overridePatchMethod`)."""
    url = create(api, alice)
    response = send(api, alice, url, "POST", BODY[:100],
                    **{"X-HTTP-Method-Override": "PATCH", "Upload-Offset": "0"})  # fmt: skip
    assert response.status_code == 204
    assert response.headers["Upload-Offset"] == "100"
    assert_tus_headers(response)
    response = send(api, alice, url, "POST", BODY[100:],
                    **{"X-HTTP-Method-Override": "patch", "Upload-Offset": "100"})  # fmt: skip
    assert response.status_code == 204
    assert response.headers["Upload-Offset"] == str(len(BODY))
    assert response.headers["Location"].startswith("/api/files/")


@pytest.mark.parametrize("sent", ["POST", "PATCH"])
def test_a_request_overridden_to_delete_terminates(api: Api, alice: Account, sent: str):
    """A PATCH (or POST) whose override says DELETE terminates; no byte is appended."""
    url = create(api, alice)
    response = send(api, alice, url, sent, BODY[:100],
                    **{"X-HTTP-Method-Override": "DELETE", "Upload-Offset": "0"})  # fmt: skip
    assert response.status_code == 204
    assert "Upload-Offset" not in response.headers
    assert_tus_headers(response)
    assert send(api, alice, url, "HEAD").status_code == 404


def test_a_post_overridden_to_head_or_options_answers_as_those(api: Api, alice: Account):
    url = create(api, alice)
    response = send(api, alice, url, "POST", **{"X-HTTP-Method-Override": "HEAD"})
    assert response.status_code == 200 and response.data == b""
    assert response.headers["Upload-Offset"] == "0"
    response = api.client.post("/api/uploads", headers={"X-HTTP-Method-Override": "OPTIONS"})
    assert response.status_code == 204 and response.headers["Tus-Version"] == "1.0.0"


def test_the_override_still_needs_the_version_and_the_owner(api: Api, alice: Account, bob: Account):
    url = create(api, alice)
    response = api.client.post(
        url,
        data=BODY[:10],
        headers={**alice.auth, "X-HTTP-Method-Override": "PATCH", "Upload-Offset": "0"},
        content_type=OFFSET_TYPE,
    )
    assert response.status_code == 412 and response.headers["Tus-Version"] == "1.0.0"
    response = send(api, bob, url, "POST", **{"X-HTTP-Method-Override": "DELETE"})
    assert response.status_code == 404
    assert offset_of(api, alice, url) == 0


def test_an_override_to_another_method_is_ignored(api: Api, alice: Account):
    """Only the methods of the tus routes replace the request's: anything else leaves the
    POST, which an upload's URL does not answer."""
    url = create(api, alice)
    for value in ("GET", "PUT", "TRACE", "FOO", ""):
        response = send(api, alice, url, "POST", BODY[:10],
                        **{"X-HTTP-Method-Override": value, "Upload-Offset": "0"})  # fmt: skip
        assert response.status_code == 405, value
        assert_tus_headers(response)
    assert offset_of(api, alice, url) == 0


def test_the_override_counts_only_under_the_tus_prefix(api: Api, alice: Account):
    record = api.create(alice)
    response = api.client.post(
        f"/api/files/{record['id']}",
        headers={**alice.auth, "X-HTTP-Method-Override": "DELETE"},
    )
    assert response.status_code == 405
    assert "Tus-Resumable" not in response.headers
    assert api.get(f"/api/files/{record['id']}", alice).status_code == 200


# --- routing errors ----------------------------------------------------------------------


@pytest.mark.parametrize(
    ("method", "path", "status"),
    [
        ("GET", "/api/uploads", 405),
        ("PUT", "/api/uploads", 405),
        ("DELETE", "/api/uploads", 405),
        ("GET", "/api/uploads/{id}", 405),
        ("POST", "/api/uploads/{id}", 405),
        ("HEAD", "/api/uploads/not-an-id", 404),
        ("PATCH", "/api/uploads/not-an-id", 404),
        ("DELETE", "/api/uploads/1234", 404),
        ("GET", "/api/uploads/{id}/more", 404),
    ],
)
def test_routing_errors_under_the_prefix_carry_the_tus_headers(
    api: Api, alice: Account, method: str, path: str, status: int
):
    url = create(api, alice)
    response = api.client.open(
        path.replace("/api/uploads/{id}", url),
        method=method,
        headers={**TUS, **alice.auth, "Upload-Offset": "0"},
    )
    assert response.status_code == status
    assert_tus_headers(response)


def test_paths_beside_the_prefix_are_not_tus(api: Api, alice: Account):
    response = api.client.get("/api/uploadsx", headers=alice.auth)
    assert response.status_code == 404
    assert "Tus-Resumable" not in response.headers


def test_options_on_an_upload_announces_the_version(api: Api, alice: Account):
    """OPTIONS may be sent to any tus address (the upload's, too); the answer "MUST contain
    the Tus-Version header", and a Tus-Resumable sent with it is ignored."""
    url = create(api, alice)
    for target in (url, "/api/uploads/00000000-0000-4000-8000-000000000000"):
        for headers in ({}, {"Tus-Resumable": "0.2.2"}):
            response = api.client.options(target, headers=headers)
            assert response.status_code == 204, (target, response.status)
            assert response.headers["Tus-Version"] == "1.0.0"
            assert response.headers["Tus-Extension"].split(",")[0] == "creation"
            assert_tus_headers(response)
    assert offset_of(api, alice, url) == 0
