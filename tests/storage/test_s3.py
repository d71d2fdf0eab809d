"""What only the S3 backend does: error mapping, private objects, failure clean-up."""

from __future__ import annotations

import io
import logging
import os
import socket
import threading
import time
from collections.abc import Iterator
from typing import Any

import pytest
from botocore.awsrequest import AWSResponse
from botocore.exceptions import (
    ClientError,
    EndpointConnectionError,
    ReadTimeoutError,
    ResponseStreamingError,
)

from app.storage import InvalidRange, ObjectNotFound, StorageError, StorageUnavailable
from app.storage.base import MiB
from app.storage.s3 import S3Storage, build_s3_client, translate_error

from .helpers import BUCKET, TEST_PART_SIZE, pending_uploads

KEY = "files/3f2b8c1e/9d7e6a52"


def client_error(code: str, status: int) -> ClientError:
    return ClientError(
        {"Error": {"Code": code, "Message": "m"}, "ResponseMetadata": {"HTTPStatusCode": status}},
        "GetObject",
    )


@pytest.mark.parametrize(
    ("error", "expected"),
    [
        (client_error("NoSuchKey", 404), ObjectNotFound),
        (client_error("404", 404), ObjectNotFound),
        (client_error("InvalidRange", 416), InvalidRange),
        (client_error("InternalError", 500), StorageUnavailable),
        (client_error("ServiceUnavailable", 503), StorageUnavailable),
        (client_error("SlowDown", 503), StorageUnavailable),
        (client_error("AccessDenied", 403), StorageUnavailable),
        (client_error("NoSuchBucket", 404), StorageUnavailable),
        (client_error("InvalidArgument", 400), StorageError),
        (EndpointConnectionError(endpoint_url="http://127.0.0.1:1"), StorageUnavailable),
        (ReadTimeoutError(endpoint_url="http://127.0.0.1:1"), StorageUnavailable),
        (ResponseStreamingError(error="connection reset"), StorageUnavailable),
    ],
)
def test_translate_error(error: Exception, expected: type[StorageError]) -> None:
    translated = translate_error(error, "download of", BUCKET, KEY)
    assert type(translated) is expected


def test_objects_are_private(s3_storage: S3Storage) -> None:
    s3_storage.put(KEY, io.BytesIO(b"secret"))
    acl = s3_storage.client.get_object_acl(Bucket=BUCKET, Key=KEY)
    assert [grant["Permission"] for grant in acl["Grants"]] == ["FULL_CONTROL"]
    assert acl["Grants"][0]["Grantee"]["Type"] == "CanonicalUser"


def test_a_missing_bucket_is_unavailable_not_missing(moto_s3: None) -> None:
    storage = S3Storage(build_s3_client(region="us-east-1"), "no-such-bucket")
    try:
        with pytest.raises(StorageUnavailable, match="does not exist"):
            storage.check()
        with pytest.raises(StorageUnavailable):
            storage.open(KEY)
        with pytest.raises(StorageUnavailable):
            storage.put(KEY, io.BytesIO(b"x"))
    finally:
        storage.close()


class FailingUploadPart:
    """The real (mocked) client, except that uploading a part fails like a dropped network."""

    def __init__(self, client: Any) -> None:
        self._client = client

    def __getattr__(self, name: str) -> Any:
        return getattr(self._client, name)

    def upload_part(self, **kwargs: Any) -> Any:
        raise EndpointConnectionError(endpoint_url="http://s3.invalid")


def test_failed_part_upload_aborts_the_multipart_upload(s3_storage: S3Storage) -> None:
    storage = S3Storage(FailingUploadPart(s3_storage.client), BUCKET, part_size=TEST_PART_SIZE)
    writer = storage.writer(KEY)
    writer.write(os.urandom(storage.single_put_limit))
    writer.write(b"one byte more sends the first part, in the background")
    with pytest.raises(StorageUnavailable) as excinfo:
        writer.commit()  # waits for the parts: the failure surfaces here at the latest
    assert isinstance(excinfo.value.__cause__, EndpointConnectionError)
    assert writer.aborted
    assert writer.buffered == 0
    assert pending_uploads(s3_storage) == []
    assert not s3_storage.exists(KEY)


class FakeBody:
    """A GET response body whose connection drops after the first chunk."""

    def __init__(self) -> None:
        self.closed = False

    def iter_chunks(self, chunk_size: int) -> Iterator[bytes]:
        yield b"a" * chunk_size
        raise ResponseStreamingError(error="connection reset by peer")

    def close(self) -> None:
        self.closed = True


class FakeClient:
    def __init__(self, body: FakeBody) -> None:
        self.body = body

    def get_object(self, **kwargs: Any) -> dict[str, Any]:
        return {"Body": self.body, "ContentLength": 10 * MiB}


def test_error_mid_stream_ends_the_body_and_releases_the_connection() -> None:
    body = FakeBody()
    storage = S3Storage(FakeClient(body), BUCKET)
    reader = storage.open(KEY)
    chunks = iter(reader)
    assert len(next(chunks)) == storage.chunk_size
    with pytest.raises(StorageUnavailable):
        next(chunks)
    assert body.closed
    assert reader.closed


@pytest.fixture
def closed_port() -> int:
    """A loopback port nothing listens on: connections are refused at once."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@pytest.fixture
def unreachable_storage(aws_credentials: None, closed_port: int) -> Iterator[S3Storage]:
    client = build_s3_client(
        endpoint_url=f"http://127.0.0.1:{closed_port}",
        region="us-east-1",
        connect_timeout=0.5,
        read_timeout=0.5,
        max_attempts=1,
    )
    storage = S3Storage(client, BUCKET)
    yield storage
    storage.close()


@pytest.mark.parametrize(
    "operation",
    [
        lambda s: s.open(KEY),
        lambda s: s.open(KEY, 0, 9),
        lambda s: s.put(KEY, io.BytesIO(b"x")),
        lambda s: s.exists(KEY),
        lambda s: s.size(KEY),
        lambda s: s.delete(KEY),
        lambda s: list(s.iter_keys()),
        lambda s: s.check(),
    ],
    ids=["open", "open-range", "put", "exists", "size", "delete", "iter_keys", "check"],
)
def test_unreachable_endpoint_is_unavailable(
    unreachable_storage: S3Storage, operation: Any
) -> None:
    began = time.monotonic()
    with pytest.raises(StorageUnavailable) as excinfo:
        operation(unreachable_storage)
    assert time.monotonic() - began < 3
    assert isinstance(excinfo.value.__cause__, EndpointConnectionError)
    assert "127.0.0.1" in str(excinfo.value)


# --- reads: a presigned GET for the usual answer, get_object for everything else ----------


def count_get_object_calls(storage: S3Storage) -> list[str]:
    calls: list[str] = []
    storage.client.meta.events.register(
        "before-call.s3.GetObject",
        lambda params, **_: calls.append(params["headers"].get("Range", "")),
    )
    return calls


def answer_presigned_reads(storage: S3Storage, make_response: Any) -> list[str]:
    """Answer the presigned GETs (signature in the query) with ``make_response(request)``;
    get_object's own requests go on to moto."""
    seen: list[str] = []

    def handler(request: Any, **_: Any) -> Any:
        if "X-Amz-Signature=" not in request.url:
            return None
        seen.append(request.headers.get("Range", ""))
        return make_response(request)

    storage.client.meta.events.register_first("before-send.s3.GetObject", handler)
    return seen


def test_reads_go_out_without_get_object_when_all_is_well(s3_storage: S3Storage) -> None:
    data = os.urandom(3 * MiB + 5)
    s3_storage.put(KEY, io.BytesIO(data))
    calls = count_get_object_calls(s3_storage)

    with s3_storage.open(KEY) as reader:
        assert (reader.length, reader.size) == (len(data), len(data))
        assert reader.read_all() == data
    with s3_storage.open(KEY, MiB, 2 * MiB - 1) as reader:
        assert (reader.start, reader.length, reader.size) == (MiB, MiB, len(data))
        assert reader.read_all() == data[MiB : 2 * MiB]

    assert calls == []


@pytest.mark.parametrize(
    ("status", "headers"),
    [
        (503, {"Content-Length": "0"}),  # a transient failure: get_object retries it
        (200, {"Content-Length": "10"}),  # the range ignored
        (206, {"Content-Length": "10"}),  # no Content-Range
    ],
    ids=["unavailable", "range-ignored", "no-content-range"],
)
def test_any_other_answer_is_left_to_get_object(
    s3_storage: S3Storage, status: int, headers: dict[str, str]
) -> None:
    data = os.urandom(1000)
    s3_storage.put(KEY, io.BytesIO(data))
    calls = count_get_object_calls(s3_storage)
    seen = answer_presigned_reads(
        s3_storage,
        lambda request: AWSResponse(request.url, status, headers, io.BytesIO(b"x" * 10)),
    )

    with s3_storage.open(KEY, 10, 19) as reader:
        assert reader.read_all() == data[10:20]

    assert seen == ["bytes=10-19"]
    assert calls == ["bytes=10-19"]


def test_errors_come_from_get_object(s3_storage: S3Storage) -> None:
    calls = count_get_object_calls(s3_storage)
    with pytest.raises(ObjectNotFound):
        s3_storage.open(KEY)
    s3_storage.put(KEY, io.BytesIO(b"0123456789"))
    with pytest.raises(InvalidRange):
        s3_storage.open(KEY, 20, 30)
    assert calls == ["", "bytes=20-30"]


def test_a_body_that_ends_early_is_an_error(s3_storage: S3Storage) -> None:
    s3_storage.put(KEY, io.BytesIO(b"x" * 100))
    body = io.BytesIO(b"x" * 60)
    answer_presigned_reads(
        s3_storage, lambda request: AWSResponse(request.url, 200, {"Content-Length": "100"}, body)
    )

    reader = s3_storage.open(KEY)
    assert reader.length == 100
    with pytest.raises(StorageUnavailable, match="40 bytes early"):
        reader.read_all()
    assert reader.closed
    assert body.closed


def test_a_presigned_url_is_reused_until_a_read_with_it_fails(
    s3_storage: S3Storage, monkeypatch: pytest.MonkeyPatch
) -> None:
    s3_storage.put(KEY, io.BytesIO(b"0123456789"))
    signed: list[str] = []
    presign = s3_storage.client.generate_presigned_url

    def counting(*args: Any, **kwargs: Any) -> str:
        signed.append(kwargs["Params"]["Key"])
        return presign(*args, **kwargs)

    monkeypatch.setattr(s3_storage.client, "generate_presigned_url", counting)
    for _ in range(3):
        with s3_storage.open(KEY, 2, 4) as reader:
            assert reader.read_all() == b"234"
    assert signed == [KEY]

    refused = answer_presigned_reads(
        s3_storage,
        lambda request: AWSResponse(request.url, 403, {"Content-Length": "0"}, io.BytesIO()),
    )
    with s3_storage.open(KEY) as reader:  # answered by get_object instead
        assert reader.read_all() == b"0123456789"
    assert refused == [""]
    with s3_storage.open(KEY) as reader:
        assert reader.read_all() == b"0123456789"
    assert signed == [KEY, KEY]  # signed again after the refusal


class WithoutHttpSession:
    """The client of a botocore without ``client._endpoint.http_session`` (a private
    attribute, gone perhaps in a version outside the pin): everything else is the real one."""

    def __init__(self, client: Any) -> None:
        self._client = client

    def __getattr__(self, name: str) -> Any:
        if name == "_endpoint":
            raise AttributeError(name)
        return getattr(self._client, name)


def test_reads_without_botocores_connection_pool_warn_once_and_serve_the_bytes(
    s3_storage: S3Storage, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    import botocore

    from app.storage import s3

    # Whatever an earlier test of this process reported, this one starts unreported.
    monkeypatch.setattr(s3, "_WITHOUT_HTTP_SESSION_REPORTED", threading.Lock())
    data = os.urandom(MiB + 7)
    s3_storage.put(KEY, io.BytesIO(data))
    fallback = S3Storage(WithoutHttpSession(s3_storage.client), BUCKET)
    calls = count_get_object_calls(fallback)

    with caplog.at_level(logging.WARNING, logger="app.storage.s3"):
        with fallback.open(KEY) as reader:
            assert reader.read_all() == data
        with fallback.open(KEY, 10, 19) as reader:
            assert reader.read_all() == data[10:20]
        with fallback.open(KEY) as reader:
            assert reader.read_all() == data

    assert calls == ["", "bytes=10-19", ""]
    [warning] = [r for r in caplog.records if r.name == "app.storage.s3"]
    assert warning.levelno == logging.WARNING
    assert warning.getMessage() == (
        f"botocore {botocore.__version__} has no client._endpoint.http_session: S3 reads go "
        "through get_object instead of presigned GETs (they work, with more CPU per read); "
        "install the botocore version pinned in pyproject.toml"
    )
    fallback.close()
