"""Objects in an S3 bucket (AWS, MinIO, SeaweedFS); objects stay private, no ACLs are set."""

from __future__ import annotations

import io
import logging
import threading
import time
from collections import deque
from collections.abc import Container, Iterator
from concurrent.futures import Future, ThreadPoolExecutor, wait
from datetime import datetime
from typing import Any, TypeAlias
from urllib.parse import urlsplit

import boto3
import botocore
from botocore.awsrequest import AWSRequest
from botocore.config import Config
from botocore.exceptions import (
    BotoCoreError,
    ClientError,
    ConnectionError,
    CredentialRetrievalError,
    HTTPClientError,
    IncompleteReadError,
    NoCredentialsError,
    PartialCredentialsError,
)
from botocore.hooks import first_non_none_response
from urllib3.exceptions import HTTPError

from .base import (
    DEFAULT_CHUNK_SIZE,
    InvalidRange,
    MiB,
    ObjectNotFound,
    ObjectReader,
    ObjectWriter,
    Storage,
    StorageError,
    StorageUnavailable,
    StoredObject,
    UnfinishedUpload,
    check_range,
    validate_key,
)

#: boto3 builds client classes at run time; ``mypy_boto3_s3.S3Client`` would type it precisely.
S3Client: TypeAlias = Any

log = logging.getLogger(__name__)

#: Objects up to this size go up in one PUT (boto3's multipart threshold); larger ones as a
#: multipart upload whose first part is this big and whose further parts are part_size.
SINGLE_PUT_LIMIT = 8 * MiB
DEFAULT_PART_SIZE = 5 * MiB
#: Parts of one object going up while the next one fills: each one more is part_size more
#: memory per concurrent upload; two keep three simultaneous transfers within the memory
#: target (BENCHMARKS.md).
DEFAULT_PARTS_IN_FLIGHT = 2
DEFAULT_UPLOAD_THREADS = 16
#: S3 refuses parts smaller than this, except the last one.
MIN_PART_SIZE = 5 * MiB
#: Validity of the presigned URLs reads are sent with (as long as the clock skew S3 tolerates
#: for signed headers), how long one is reused for reads of the same object, and how many are
#: kept.
PRESIGNED_READ_SECONDS = 900
PRESIGNED_REUSE_SECONDS = 300
PRESIGNED_URLS_KEPT = 1024

#: Taken (never given back) by the first read that finds botocore without the connection pool
#: presigned reads go through, so that the warning is logged once per process.
_WITHOUT_HTTP_SESSION_REPORTED = threading.Lock()

_NOT_FOUND_CODES = frozenset({"NoSuchKey", "NotFound", "404"})
_RANGE_CODES = frozenset({"InvalidRange", "416"})
#: Errors an operator has to fix (bucket, credentials, clock) or that pass with time.
_UNAVAILABLE_CODES = frozenset(
    {
        "NoSuchBucket",
        "AccessDenied",
        "InvalidAccessKeyId",
        "SignatureDoesNotMatch",
        "RequestTimeTooSkewed",
        "ExpiredToken",
        "InvalidToken",
        "RequestTimeout",
        "SlowDown",
        "Throttling",
        "ThrottlingException",
        "ServiceUnavailable",
        "InternalError",
    }
)
_UNAVAILABLE_EXCEPTIONS = (
    HTTPClientError,  # connection closed, read timeout, broken response stream
    ConnectionError,  # endpoint unreachable, connect timeout, TLS and proxy failures
    IncompleteReadError,
    NoCredentialsError,
    PartialCredentialsError,
    CredentialRetrievalError,
)


def build_s3_client(
    *,
    endpoint_url: str | None = None,
    region: str | None = None,
    addressing_style: str | None = None,
    connect_timeout: float = 5.0,
    read_timeout: float = 60.0,
    max_attempts: int = 3,
    max_pool_connections: int = 20,
    aws_access_key_id: str | None = None,
    aws_secret_access_key: str | None = None,
) -> S3Client:
    """Build the one S3 client the application shares between threads.

    Without explicit keys, credentials come from boto3's usual chain (environment first). The
    client makes no request until it is used; only a chain without environment credentials may
    probe the instance metadata service while the client is built. ``max_attempts`` counts
    the first try: 3 means two retries (standard mode, with backoff) for transient failures.
    """
    if addressing_style is None and endpoint_url:
        addressing_style = "path"  # MinIO and SeaweedFS serve buckets under the path
    config = Config(
        connect_timeout=connect_timeout,
        read_timeout=read_timeout,
        retries={"mode": "standard", "total_max_attempts": max_attempts},
        max_pool_connections=max_pool_connections,
        s3={
            **({"addressing_style": addressing_style} if addressing_style else {}),
            # Requests are signed, bodies are not: botocore would otherwise hash every part
            # with SHA-256 a second time when the endpoint is plain HTTP. The service hashes
            # every upload itself (SHA-256, checked by `storage verify`).
            "payload_signing_enabled": False,
        },
        # Bodies still arrive checked: over TLS by TLS; over plain HTTP (MinIO on a private
        # network) each request carries a CRC32 that the server verifies, cheaper than the
        # SHA-256 it replaces.
        request_checksum_calculation=(
            "when_supported" if (endpoint_url or "").startswith("http://") else "when_required"
        ),
        response_checksum_validation="when_required",
        # Presigned reads (``S3Storage.open``) too: botocore would otherwise presign with
        # SigV2 query parameters in us-east-1, which newer regions and servers refuse.
        signature_version="s3v4",
    )
    session = boto3.session.Session()
    return session.client(
        "s3",
        endpoint_url=endpoint_url or None,
        region_name=region or None,
        aws_access_key_id=aws_access_key_id,
        aws_secret_access_key=aws_secret_access_key,
        config=config,
    )


def _error_code(exc: ClientError) -> tuple[str, int]:
    code = str(exc.response.get("Error", {}).get("Code", ""))
    status = int(exc.response.get("ResponseMetadata", {}).get("HTTPStatusCode", 0) or 0)
    return code, status


def translate_error(exc: Exception, action: str, bucket: str, key: str | None) -> StorageError:
    """Map a botocore failure to the storage exception the HTTP layer understands."""
    target = f"s3://{bucket}/{key}" if key is not None else f"s3://{bucket}"
    if isinstance(exc, ClientError):
        code, status = _error_code(exc)
        if code == "NoSuchBucket":
            return StorageUnavailable(f"S3 {action} {target} failed: the bucket does not exist")
        if code in _NOT_FOUND_CODES or (status == 404 and key is not None):
            return ObjectNotFound(key or target)
        if code in _RANGE_CODES or status == 416:
            return InvalidRange(f"S3 {action} {target}: range not satisfiable")
        if code in _UNAVAILABLE_CODES or status >= 500 or status in (401, 403, 408, 429):
            return StorageUnavailable(f"S3 {action} {target} failed: {code or status} ({exc})")
        return StorageError(f"S3 {action} {target} failed: {exc}")
    if isinstance(exc, _UNAVAILABLE_EXCEPTIONS):
        return StorageUnavailable(f"S3 {action} {target} failed: {exc}")
    return StorageError(f"S3 {action} {target} failed: {exc}")


class _PartBody(io.RawIOBase):
    """A filled part buffer as a seekable stream: botocore reads it (to sign, send and, on a
    retry, send again) without the full copy that turning the buffer into bytes would make."""

    def __init__(self, buffer: bytearray) -> None:
        super().__init__()
        self._view = memoryview(buffer)
        self._position = 0

    def __len__(self) -> int:
        return len(self._view)

    def readable(self) -> bool:
        return True

    def seekable(self) -> bool:
        return True

    def readinto(self, target: Any) -> int:
        end = min(self._position + len(target), len(self._view))
        count = end - self._position
        target[:count] = self._view[self._position : end]
        self._position = end
        return count

    def seek(self, offset: int, whence: int = io.SEEK_SET) -> int:
        base = {io.SEEK_SET: 0, io.SEEK_CUR: self._position, io.SEEK_END: len(self._view)}
        self._position = max(0, base[whence] + offset)
        return self._position

    def tell(self) -> int:
        return self._position

    def close(self) -> None:
        self._view.release()
        super().close()


class S3ObjectWriter(ObjectWriter):
    """Small objects become one PUT; larger ones a multipart upload whose parts go up in the
    background while the next part fills, at most `parts_in_flight` of them at a time, so the
    upload keeps pace with the incoming request and memory stays at a few parts."""

    def __init__(self, storage: S3Storage, key: str) -> None:
        super().__init__(key)
        self._storage = storage
        self._client = storage.client
        self._bucket = storage.bucket
        self._part_size = storage.part_size
        self._put_limit = storage.single_put_limit
        self._buffer = bytearray()
        self._upload_id: str | None = None
        self._parts: list[dict[str, Any]] = []
        # Parts going up, with their sizes.
        self._in_flight: deque[tuple[Future[dict[str, Any]], int]] = deque()
        self._next_part = 1

    @property
    def buffered(self) -> int:
        """Bytes held in memory: the filling part and the parts still going up."""
        return len(self._buffer) + sum(size for _, size in self._in_flight)

    @property
    def upload_id(self) -> str | None:
        """The pending multipart upload, once the object outgrew one part."""
        return self._upload_id

    def write(self, chunk: bytes) -> None:
        self._check_open()
        view = memoryview(chunk)
        while view:
            # Flush a full part only when more data follows, so the last part is never empty
            # and an object of exactly one part is a single PUT.
            limit = self._put_limit if self._upload_id is None else self._part_size
            if len(self._buffer) >= limit:
                self._flush_part()
                limit = self._part_size
            take = limit - len(self._buffer)
            self._buffer += view[:take]
            view = view[take:]
        self.size += len(chunk)

    def _upload_part(self, number: int, body: _PartBody) -> dict[str, Any]:
        response = self._client.upload_part(
            Bucket=self._bucket,
            Key=self.key,
            UploadId=self._upload_id,
            PartNumber=number,
            Body=body,
        )
        return {"PartNumber": number, "ETag": response["ETag"]}

    def _flush_part(self) -> None:
        body, self._buffer = _PartBody(self._buffer), bytearray()
        try:
            if self._upload_id is None:
                response = self._client.create_multipart_upload(Bucket=self._bucket, Key=self.key)
                self._upload_id = response["UploadId"]
            while len(self._in_flight) >= self._storage.parts_in_flight:
                self._parts.append(self._in_flight.popleft()[0].result())
            number, self._next_part = self._next_part, self._next_part + 1
            future = self._storage.uploads.submit(self._upload_part, number, body)
            self._in_flight.append((future, len(body)))
        except (BotoCoreError, ClientError) as exc:
            self.abort()
            raise translate_error(exc, "upload of", self._bucket, self.key) from exc

    def _finish_parts(self) -> None:
        while self._in_flight:
            self._parts.append(self._in_flight.popleft()[0].result())

    def commit(self) -> None:
        self._check_open()
        try:
            if self._upload_id is None:
                self._client.put_object(
                    Bucket=self._bucket, Key=self.key, Body=_PartBody(self._buffer)
                )
            else:
                self._flush_part()
                self._finish_parts()
                self._client.complete_multipart_upload(
                    Bucket=self._bucket,
                    Key=self.key,
                    UploadId=self._upload_id,
                    MultipartUpload={"Parts": self._parts},
                )
        except (BotoCoreError, ClientError) as exc:
            self.abort()
            raise translate_error(exc, "upload of", self._bucket, self.key) from exc
        self._buffer = bytearray()
        self.committed = True

    def abort(self) -> None:
        """Drop the buffer and the pending multipart upload.

        Failing to abort the upload is logged, not raised: the caller is already handling a
        failure and cannot do better; a bucket lifecycle rule removes stale uploads.
        """
        if self.committed or self.aborted:
            return
        self.aborted = True
        self._buffer = bytearray()
        # Parts still going up would land after the abort; let them finish first.
        futures = [future for future, _ in self._in_flight]
        for future in futures:
            future.cancel()
        wait(futures)
        self._in_flight.clear()
        upload_id, self._upload_id = self._upload_id, None
        if upload_id is None:
            return
        try:
            self._client.abort_multipart_upload(
                Bucket=self._bucket, Key=self.key, UploadId=upload_id
            )
        except ClientError as exc:
            if _error_code(exc)[0] != "NoSuchUpload":
                log.warning("could not abort multipart upload of %r: %s", self.key, exc)
        except BotoCoreError as exc:
            log.warning("could not abort multipart upload of %r: %s", self.key, exc)


def _report_without_http_session() -> None:
    """Tell the operator, once per process, that reads lost their fast path: the botocore
    installed has no ``client._endpoint.http_session`` (a private attribute), which happens
    with a version outside the pin in pyproject.toml."""
    if _WITHOUT_HTTP_SESSION_REPORTED.acquire(blocking=False):
        log.warning(
            "botocore %s has no client._endpoint.http_session: S3 reads go through "
            "get_object instead of presigned GETs (they work, with more CPU per read); "
            "install the botocore version pinned in pyproject.toml",
            botocore.__version__,
        )


class S3Storage(Storage):
    """Objects in one private bucket, through one shared, thread-safe boto3 client."""

    def __init__(
        self,
        client: S3Client,
        bucket: str,
        part_size: int = DEFAULT_PART_SIZE,
        chunk_size: int = DEFAULT_CHUNK_SIZE,
        parts_in_flight: int = DEFAULT_PARTS_IN_FLIGHT,
        upload_threads: int = DEFAULT_UPLOAD_THREADS,
        single_put_limit: int = SINGLE_PUT_LIMIT,
    ) -> None:
        super().__init__(chunk_size)
        if part_size <= 0:
            raise ValueError(f"part size must be positive, got {part_size}")
        if parts_in_flight < 1 or upload_threads < 1:
            raise ValueError("parts_in_flight and upload_threads must be at least 1")
        self.client = client
        self.bucket = bucket
        self.part_size = part_size
        self.single_put_limit = max(single_put_limit, part_size)
        self.parts_in_flight = parts_in_flight
        # One pool for the whole process; its threads only send parts (I/O, no GIL held).
        self.uploads = ThreadPoolExecutor(upload_threads, thread_name_prefix="s3-part")
        # Presigned read URLs by key, with the monotonic time until which they are reused.
        self._read_urls: dict[str, tuple[float, str]] = {}

    def __repr__(self) -> str:
        return f"S3Storage(bucket={self.bucket!r}, endpoint={self.endpoint_url!r})"

    @property
    def endpoint_url(self) -> str:
        return str(self.client.meta.endpoint_url)

    def _error(self, exc: Exception, action: str, key: str | None) -> StorageError:
        return translate_error(exc, action, self.bucket, key)

    def writer(self, key: str) -> S3ObjectWriter:
        return S3ObjectWriter(self, validate_key(key))

    def open(
        self, key: str, start: int = 0, end: int | None = None, *, chunk_size: int | None = None
    ) -> ObjectReader:
        validate_key(key)
        check_range(start, end)
        chunk_size = chunk_size or self.chunk_size
        range_header = (
            f"bytes={start}-{'' if end is None else end}" if start or end is not None else None
        )
        reader = self._open_presigned(key, range_header, start, chunk_size)
        if reader is not None:
            return reader
        return self._open_with_get_object(key, range_header, start, chunk_size)

    def _open_presigned(
        self, key: str, range_header: str | None, start: int, chunk_size: int
    ) -> ObjectReader | None:
        """The common case, cheaply: a presigned GET sent through the client's own connection
        pool, without the request and response modelling of ``get_object`` (less CPU before
        the first byte; bench.ablation measures what it is worth). Gives up (None) on anything
        but the expected answer, so retries and every error go through ``get_object`` and its
        translation."""
        send = getattr(getattr(self.client, "_endpoint", None), "http_session", None)
        if send is None:
            _report_without_http_session()
            return None
        try:
            url = self._presigned_url(key)
            headers = {"Range": range_header} if range_header else {}
            request = AWSRequest(method="GET", url=url, headers=headers).prepare()
            request.stream_output = True
            # What botocore does before sending: a handler registered there (moto's mock)
            # may answer. (botocore's Stubber answers at before-call, which this skips.)
            answered = self.client.meta.events.emit("before-send.s3.GetObject", request=request)
            response = first_non_none_response(answered) or send.send(request)
        except (BotoCoreError, ClientError) as exc:
            # Not the message: it holds the URL, which reads the object for 15 minutes.
            log.debug("presigned read of %r failed (%s), using get_object", key, type(exc).__name__)
            return None
        raw = response.raw
        expected = 206 if range_header else 200
        length = size = 0
        try:
            length = int(response.headers["Content-Length"])
            size = length
            if range_header:
                size = int(response.headers["Content-Range"].rpartition("/")[2])
        except (KeyError, ValueError):
            response.status_code = 0  # unreadable answer: leave it to get_object
        if response.status_code != expected:
            raw.close()
            self._read_urls.pop(key, None)  # perhaps signed with credentials now expired
            return None
        return ObjectReader(
            self._read1_chunks(raw, length, key, chunk_size),
            length,
            raw.close,
            start=start,
            size=size,
        )

    def offload_location(self, key: str) -> str:
        """The path and query of a presigned GET, which the proxy sends to the endpoint; the
        URL reads the object for a while, so it must never reach a client."""
        url = urlsplit(self._presigned_url(validate_key(key)))
        return f"{url.path.lstrip('/')}?{url.query}"

    def _presigned_url(self, key: str) -> str:
        """A presigned GET of `key`, reused for a while: signing costs CPU on every read."""
        now = time.monotonic()
        kept = self._read_urls.get(key)
        if kept is not None and kept[0] > now:
            return kept[1]
        url: str = self.client.generate_presigned_url(
            "get_object",
            Params={"Bucket": self.bucket, "Key": key},
            ExpiresIn=PRESIGNED_READ_SECONDS,
        )
        if len(self._read_urls) >= PRESIGNED_URLS_KEPT:
            self._read_urls.clear()
        self._read_urls[key] = (now + PRESIGNED_REUSE_SECONDS, url)
        return url

    def _read1_chunks(self, raw: Any, length: int, key: str, chunk_size: int) -> Iterator[bytes]:
        """Pass on what has arrived, up to a chunk at a time, instead of waiting for whole
        chunks: the first bytes leave while the rest are still coming in. The length is
        checked here (botocore sends with urllib3's own check off)."""
        left = length
        try:
            while left:
                chunk = raw.read1(min(chunk_size, left))
                if not chunk:  # as get_object's IncompleteReadError
                    raise StorageUnavailable(
                        f"S3 download of s3://{self.bucket}/{key} ended {left} bytes early"
                    )
                left -= len(chunk)
                yield chunk
        except (HTTPError, OSError) as exc:
            raise StorageUnavailable(
                f"S3 download of s3://{self.bucket}/{key} failed: {exc}"
            ) from exc

    def _open_with_get_object(
        self, key: str, range_header: str | None, start: int, chunk_size: int
    ) -> ObjectReader:
        kwargs: dict[str, Any] = {"Bucket": self.bucket, "Key": key}
        if range_header:
            kwargs["Range"] = range_header
        try:
            response = self.client.get_object(**kwargs)
        except (BotoCoreError, ClientError) as exc:
            raise self._error(exc, "download of", key) from exc
        body = response["Body"]
        length = int(response["ContentLength"])
        size = length
        content_range = response.get("ContentRange")
        if content_range:  # "bytes 0-99/1234"
            size = int(content_range.rpartition("/")[2])
        elif range_header:
            # The server ignored the range (allowed by HTTP); refuse rather than send wrong bytes.
            body.close()
            raise StorageError(f"S3 ignored the range of s3://{self.bucket}/{key}")
        chunks = self._chunks(body, key, chunk_size)
        return ObjectReader(chunks, length, body.close, start=start, size=size)

    def _chunks(self, body: Any, key: str, chunk_size: int) -> Iterator[bytes]:
        """Stream the body; a failure here comes after the status line, so it just ends it."""
        try:
            yield from body.iter_chunks(chunk_size)
        except (BotoCoreError, ClientError, OSError) as exc:
            raise self._error(exc, "download of", key) from exc

    def delete(self, key: str) -> None:
        validate_key(key)
        try:
            self.client.delete_object(Bucket=self.bucket, Key=key)
        except ClientError as exc:
            if _error_code(exc)[0] == "NoSuchKey":
                return
            raise self._error(exc, "delete of", key) from exc
        except BotoCoreError as exc:
            raise self._error(exc, "delete of", key) from exc

    def _head(self, key: str) -> dict[str, Any]:
        validate_key(key)
        try:
            return self.client.head_object(Bucket=self.bucket, Key=key)  # type: ignore[return-value]
        except (BotoCoreError, ClientError) as exc:
            raise self._error(exc, "lookup of", key) from exc

    def exists(self, key: str) -> bool:
        try:
            self._head(key)
        except ObjectNotFound:
            return False
        return True

    def size(self, key: str) -> int:
        return int(self._head(key)["ContentLength"])

    def iter_objects(self, prefix: str = "") -> Iterator[StoredObject]:
        paginator = self.client.get_paginator("list_objects_v2")
        try:
            for page in paginator.paginate(Bucket=self.bucket, Prefix=prefix):
                for item in page.get("Contents", ()):
                    yield StoredObject(item["Key"], int(item["Size"]), item["LastModified"])
        except (BotoCoreError, ClientError) as exc:
            raise self._error(exc, "listing of", None) from exc

    def unfinished_uploads(
        self, older_than: datetime, keep: Container[str] = ()
    ) -> Iterator[UnfinishedUpload]:
        paginator = self.client.get_paginator("list_multipart_uploads")
        try:
            for page in paginator.paginate(Bucket=self.bucket):
                for upload in page.get("Uploads", ()):
                    if upload["Initiated"] < older_than and upload["Key"] not in keep:
                        yield UnfinishedUpload(
                            upload["Key"], upload["Initiated"], upload["UploadId"]
                        )
        except (BotoCoreError, ClientError) as exc:
            raise self._error(exc, "listing of unfinished uploads in", None) from exc

    def discard_unfinished_upload(self, upload: UnfinishedUpload) -> None:
        try:
            self.client.abort_multipart_upload(
                Bucket=self.bucket, Key=upload.name, UploadId=upload.handle
            )
        except ClientError as exc:
            if _error_code(exc)[0] != "NoSuchUpload":
                raise self._error(exc, "clean-up of an unfinished upload in", None) from exc
        except BotoCoreError as exc:
            raise self._error(exc, "clean-up of an unfinished upload in", None) from exc

    def check(self) -> None:
        where = f"S3 bucket {self.bucket!r} at {self.endpoint_url}"
        try:
            self.client.head_bucket(Bucket=self.bucket)
        except ClientError as exc:
            code, status = _error_code(exc)
            if status == 404 or code in ("NoSuchBucket", "404"):
                reason = "the bucket does not exist"
            elif status in (401, 403):
                reason = "access denied (check AWS_ACCESS_KEY_ID / AWS_SECRET_ACCESS_KEY)"
            else:
                reason = f"{code or status}: {exc}"
            raise StorageUnavailable(f"{where} is not usable: {reason}") from exc
        except BotoCoreError as exc:
            raise StorageUnavailable(f"{where} is not reachable: {exc}") from exc

    def close(self) -> None:
        self.uploads.shutdown(wait=True)
        self.client.close()
