"""Streaming multipart uploads: each file part goes straight into storage as it arrives.

Nothing is spooled to a temporary file and no file is held in memory: every chunk is counted,
hashed, sampled for type detection and written to a storage writer. An object only becomes
visible in storage once its part has ended within the size limit and its type is allowed;
everything else is aborted. The caller commits or discards the staged objects as a whole.
"""

from __future__ import annotations

import hashlib
import logging
import threading
from collections import deque
from collections.abc import Callable, Iterable, Iterator
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import BinaryIO

from werkzeug.exceptions import RequestEntityTooLarge
from werkzeug.http import parse_options_header
from werkzeug.sansio.multipart import (
    Data,
    Epilogue,
    Event,
    Field,
    File,
    MultipartDecoder,
    NeedData,
    State,
)

from app.detection import SampleCollector, UnsupportedFileType, detect_mime_type
from app.detection.sample import Sample
from app.exceptions import DomainError
from app.storage import ObjectWriter, Storage, StorageError

log = logging.getLogger(__name__)

#: Request body read per step. Each upload holds a few of these at once (the read, the
#: parser's buffer, the part data, the chunk being hashed), which bounds the memory of
#: concurrent transfers; smaller steps make parsing slower (bench.transfer measures both).
READ_SIZE = 512 * 1024
MAX_FIELDS_SIZE = 1024 * 1024
MAX_PARTS = 1000
MAX_HEADER_SIZE = 64 * 1024
ALLOWED_EXTENSIONS = (
    "pdf, txt, csv, jpg, jpeg, png, gif, webp, doc, docx, xlsx, pptx, zip, mp4, wav, ogg, "
    "mp3, rdf, json"
)


class MalformedUpload(DomainError):
    """The body is not valid multipart/form-data (answered with 400)."""

    def __init__(self) -> None:
        super().__init__("The multipart/form-data body is malformed or incomplete.")


@dataclass
class StagedFile:
    """One file part: where it went and what was learned while it streamed."""

    index: int
    field: str
    original_name: str
    size: int = 0
    sha256: str = ""
    mime_type: str | None = None
    key: str | None = None
    error: str | None = None

    # The content's columns as a record names them (app/files/versions.py `content_of`).
    @property
    def stored_path(self) -> str | None:
        return self.key

    @property
    def checksum_sha256(self) -> str:
        return self.sha256


@dataclass
class ReceivedUpload:
    fields: dict[str, str] = field(default_factory=dict)
    files: list[StagedFile] = field(default_factory=list)
    # Form fields whose bytes were not UTF-8; reported as validation errors.
    field_errors: dict[str, list[str]] = field(default_factory=dict)

    def discard(self, storage: Storage) -> None:
        """Remove every object this upload stored; used when the request fails as a whole."""
        discard(self.files, storage)


def discard(files: Iterable[StagedFile], storage: Storage) -> None:
    """Remove the stored objects of `files`, for a request or an import that failed.

    Best effort: one failed deletion neither stops the others nor hides the error that made
    the request fail.
    """
    for staged in files:
        if staged.key is None:
            continue
        try:
            storage.delete(staged.key)
        except StorageError:
            log.exception("could not remove object %s of a failed upload", staged.key)


def clean_file_name(raw: str | None) -> str:
    """The client's name without folders or control characters, at most 255 characters."""
    name = (raw or "").replace("\\", "/").rsplit("/", 1)[-1]
    name = "".join(ch for ch in name if ch.isprintable()).strip()
    if len(name) > 255:
        stem, dot, ext = name.rpartition(".")
        name = (stem[: 254 - len(ext)] + dot + ext) if dot and len(ext) < 16 else name[:255]
    return name or "file"


def multipart_boundary(content_type: str | None) -> bytes | None:
    mimetype, options = parse_options_header(content_type or "")
    boundary = options.get("boundary")
    if mimetype != "multipart/form-data" or not boundary:
        return None
    return boundary.encode("latin-1")


def check_file(staged: StagedFile, sample: Callable[[], Sample] | None, max_size: int) -> None:
    """The rules every uploaded file passes, however it arrived: within the size limit, not
    empty, of an allowed type (detected from `sample`, when given). Sets `staged.error`, or
    `staged.mime_type` for an accepted file."""
    if staged.size > max_size:
        staged.error = (
            f"The {staged.field} field must not be greater than {max_size // 1024} kilobytes."
        )
    elif staged.size == 0:
        staged.error = f"The {staged.field} field must not be an empty file."
    elif sample is not None:
        try:
            staged.mime_type = detect_mime_type(sample(), staged.original_name)
        except UnsupportedFileType as exc:
            staged.error = (
                f"The {staged.field} field must be a file of type: "
                f"{ALLOWED_EXTENSIONS}. {exc.reason}"
            )


class _FilePart:
    """Copies one file part into storage while counting, hashing and sampling it."""

    def __init__(
        self, staged: StagedFile, key: str | None, writer: ObjectWriter | None, max_size: int
    ) -> None:
        self.staged = staged
        self.key = key
        self.writer = writer
        self.max_size = max_size
        self.hasher = hashlib.sha256()
        self.sample = SampleCollector()

    def write(self, chunk: bytes) -> None:
        self.staged.size += len(chunk)
        if self.writer is None:
            return
        if self.staged.size > self.max_size:
            # The limit is enforced as the bytes arrive: stop storing, keep counting.
            self.abort()
            return
        self.hasher.update(chunk)
        self.sample.feed(chunk)
        self.writer.write(chunk)

    def finish(self, commit: Callable[[ObjectWriter], None] | None = None) -> None:
        """Check the finished part; an accepted one is committed, by `commit` if given
        (which then sets `staged.key` once the object is stored), others are aborted."""
        staged = self.staged
        if commit is None:
            commit = self._commit_now
        check_file(staged, self.sample.sample if self.writer is not None else None, self.max_size)
        if staged.error is None and self.writer is not None:
            staged.sha256 = self.hasher.hexdigest()
            # Handed over: a failed commit aborts its own writer.
            writer, self.writer = self.writer, None
            commit(writer)
        else:
            self.abort()

    def _commit_now(self, writer: ObjectWriter) -> None:
        writer.commit()
        self.staged.key = self.key

    def abort(self) -> None:
        if self.writer is not None:
            self.writer.abort()
            self.writer = None


def stage_file(
    stream: BinaryIO, name: str, writer: ObjectWriter, *, max_size: int, field: str = "file"
) -> StagedFile:
    """Copy one file from a stream into storage exactly as an uploaded file part is copied.

    For callers outside HTTP (the bulk import): the same counting, hashing, size limit, type
    detection and messages. The writer is taken over: committed when the file is accepted,
    aborted otherwise. Reading stops once the file is known to be too large.
    """
    staged = StagedFile(0, field, clean_file_name(name))
    part = _FilePart(staged, writer.key, writer, max_size)
    try:
        while chunk := stream.read(READ_SIZE):
            part.write(chunk)
            if staged.size > max_size:
                break
        part.finish()
    except BaseException:
        part.abort()
        raise
    return staged


def _read_chunks(stream: BinaryIO) -> Iterable[bytes | None]:
    while chunk := stream.read(READ_SIZE):
        yield chunk
    yield None


def _events(stream: BinaryIO, boundary: bytes) -> Iterator[Event]:
    """The parts of a multipart body up to its closing boundary; anything after is not read.

    Werkzeug signals a body that is not valid multipart (bad headers, cut short) with
    ValueError; that, and a body without boundaries, is a client error here.
    """
    # The decoder's buffer is drained after every read, so more than one read plus a part
    # header means a body without boundaries or with an endless header: refuse it rather
    # than let it pile up in memory.
    decoder = MultipartDecoder(
        boundary, max_form_memory_size=READ_SIZE + MAX_HEADER_SIZE, max_parts=MAX_PARTS
    )
    for chunk in _read_chunks(stream):
        try:
            decoder.receive_data(chunk)
            while not isinstance(event := decoder.next_event(), NeedData | Epilogue):
                yield event
        except (ValueError, RequestEntityTooLarge) as exc:
            raise MalformedUpload() from exc
        if decoder.state == State.EPILOGUE:
            return
    raise MalformedUpload()


class _Commits:
    """Commits the accepted files of one upload, up to `in_background` of them in threads.

    Where a commit holds no memory (the local backend's fsync and rename), the next file is
    parsed while the previous ones are made durable; the disk then also merges their journal
    flushes. With 0 each file is committed before reading on. `settle` waits for all of them;
    an object counts as stored (`staged.key`) only once its commit has returned.
    """

    def __init__(self, in_background: int) -> None:
        self.in_background = in_background
        self.pending: deque[tuple[StagedFile, str | None, Future[None]]] = deque()

    def commit(self, staged: StagedFile, key: str | None) -> Callable[[ObjectWriter], None]:
        def start(writer: ObjectWriter) -> None:
            if not self.in_background:
                writer.commit()
                staged.key = key
                return
            try:
                future = _commit_pool().submit(writer.commit)
            except BaseException:
                writer.abort()
                raise
            self.pending.append((staged, key, future))
            while len(self.pending) > self.in_background:
                self._settle_oldest()

        return start

    def settle(self, raise_errors: bool = True) -> None:
        """Wait for every commit; with `raise_errors`, the first failure is raised (after
        all have ended, so that no commit is still running when the upload is discarded)."""
        error: BaseException | None = None
        while self.pending:
            try:
                self._settle_oldest()
            except BaseException as exc:  # noqa: BLE001 - kept, raised below
                error = error or exc
        if error is not None and raise_errors:
            raise error

    def _settle_oldest(self) -> None:
        staged, key, future = self.pending[0]
        try:
            future.result()  # an interruption here leaves the commit pending, to settle again
        finally:
            if future.done():
                self.pending.popleft()
        staged.key = key


_pool: ThreadPoolExecutor | None = None
_pool_lock = threading.Lock()


def _commit_pool() -> ThreadPoolExecutor:
    """The threads that commit files in the background, shared by all uploads."""
    global _pool
    with _pool_lock:
        if _pool is None:
            _pool = ThreadPoolExecutor(8, thread_name_prefix="upload-commit")
        return _pool


class _UploadReader:
    """Turns the decoder's events into stored files and form fields."""

    def __init__(
        self,
        storage: Storage,
        is_file_field: Callable[[str], bool],
        error_key: Callable[[int], str],
        new_key: Callable[[int], str],
        max_file_size: int,
        max_files: int,
    ) -> None:
        self.storage = storage
        self.is_file_field = is_file_field
        self.error_key = error_key
        self.new_key = new_key
        self.max_file_size = max_file_size
        self.max_files = max_files
        self.upload = ReceivedUpload()
        self.commits = _Commits(storage.commits_in_background)
        self.part: _FilePart | None = None
        self.field_name: str | None = None
        self.field_value = bytearray()
        self.fields_size = 0

    def start_file(self, event: File) -> None:
        # File parts under other names are read past and ignored.
        self.part, self.field_name = None, None
        if not self.is_file_field(event.name or ""):
            return
        index = len(self.upload.files)
        staged = StagedFile(index, self.error_key(index), clean_file_name(event.filename))
        self.upload.files.append(staged)
        if index < self.max_files:
            key = self.new_key(index)
            self.part = _FilePart(staged, key, self.storage.writer(key), self.max_file_size)
        else:
            self.part = _FilePart(staged, None, None, self.max_file_size)

    def start_field(self, event: Field) -> None:
        self.part, self.field_name = None, event.name or None
        self.field_value.clear()

    def data(self, event: Data) -> None:
        if self.part is not None:
            self.part.write(event.data)
            if not event.more_data:
                self.part.finish(self.commits.commit(self.part.staged, self.part.key))
                self.part = None
        elif self.field_name is not None:
            self.fields_size += len(event.data)
            if self.fields_size > MAX_FIELDS_SIZE:
                raise RequestEntityTooLarge()
            self.field_value.extend(event.data)
            if not event.more_data:
                self.finish_field(self.field_name)

    def finish_field(self, name: str) -> None:
        """Keep the field's text; a repeated field keeps its last value, as PHP did."""
        try:
            self.upload.fields[name] = self.field_value.decode("utf-8")
            self.upload.field_errors.pop(name, None)
        except UnicodeDecodeError:
            self.upload.fields.pop(name, None)
            self.upload.field_errors[name] = [f"The {name} field must be UTF-8 text."]

    def abort(self) -> None:
        if self.part is not None:
            self.part.abort()
        self.commits.settle(raise_errors=False)
        self.upload.discard(self.storage)


def receive_upload(
    stream: BinaryIO,
    boundary: bytes,
    storage: Storage,
    *,
    is_file_field: Callable[[str], bool],
    error_key: Callable[[int], str],
    new_key: Callable[[int], str],
    max_file_size: int,
    max_files: int,
) -> ReceivedUpload:
    """Read a multipart body, storing accepted file parts and collecting the form fields.

    Files beyond `max_files` are counted but not stored. On any exception every object
    stored so far is removed again before the exception propagates.
    """
    reader = _UploadReader(storage, is_file_field, error_key, new_key, max_file_size, max_files)
    try:
        for event in _events(stream, boundary):
            if isinstance(event, File):
                reader.start_file(event)
            elif isinstance(event, Field):
                reader.start_field(event)
            elif isinstance(event, Data):
                reader.data(event)
        reader.commits.settle()
    except BaseException:
        reader.abort()
        raise
    return reader.upload
