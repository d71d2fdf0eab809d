"""Objects as files in a private folder; the default backend for a single machine."""

from __future__ import annotations

import contextlib
import os
import tempfile
from collections.abc import Container, Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import BinaryIO

from .base import (
    DEFAULT_CHUNK_SIZE,
    ObjectNotFound,
    ObjectReader,
    ObjectWriter,
    Storage,
    StorageError,
    StorageUnavailable,
    StoredObject,
    UnfinishedUpload,
    check_range,
    resolve_range,
    validate_key,
)

#: Folder under the root for writes in progress; on the same filesystem, so commit is a rename.
TMP_DIR = ".tmp"

_DIR_MODE = 0o700


def fsync_dir(path: Path) -> None:
    """Persist a rename; best effort, as some platforms cannot open directories."""
    try:
        fd = os.open(path, os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:
        pass
    finally:
        os.close(fd)


def _unavailable(action: str, key: str, exc: OSError) -> StorageUnavailable:
    return StorageUnavailable(f"local storage could not {action} {key!r}: {exc.strerror or exc}")


class LocalObjectWriter(ObjectWriter):
    """Writes to a temporary file and renames it into place on commit."""

    def __init__(self, storage: LocalStorage, key: str, final_path: Path) -> None:
        super().__init__(key)
        self._storage = storage
        self._final_path = final_path
        try:
            storage.ensure_folders()
            fd, tmp_name = tempfile.mkstemp(dir=storage.tmp_dir, prefix="upload-")
        except OSError as exc:
            raise _unavailable("start writing", key, exc) from exc
        self.tmp_path = Path(tmp_name)
        self._file: BinaryIO | None = os.fdopen(fd, "wb")

    def write(self, chunk: bytes) -> None:
        self._check_open()
        assert self._file is not None
        try:
            self._file.write(chunk)
        except OSError as exc:
            self.abort()
            raise _unavailable("write", self.key, exc) from exc
        self.size += len(chunk)

    def commit(self) -> None:
        self._check_open()
        assert self._file is not None
        try:
            self._file.flush()
            os.fsync(self._file.fileno())
            self._file.close()
            self._file = None
            self._move_into_place()
        except OSError as exc:
            self.abort()
            raise _unavailable("store", self.key, exc) from exc
        self.committed = True

    def _move_into_place(self) -> None:
        parent = self._final_path.parent
        # A concurrent delete may prune the freshly created parent folder; one retry covers it.
        for attempt in range(2):
            parent.mkdir(mode=_DIR_MODE, parents=True, exist_ok=True)
            try:
                os.replace(self.tmp_path, self._final_path)
                break
            except FileNotFoundError:
                if attempt or not self.tmp_path.exists():
                    raise
        fsync_dir(parent)

    def abort(self) -> None:
        if self.committed or self.aborted:
            return
        self.aborted = True
        if self._file is not None:
            with contextlib.suppress(OSError):
                self._file.close()
            self._file = None
        with contextlib.suppress(FileNotFoundError):
            self.tmp_path.unlink()


class LocalStorage(Storage):
    """Objects stored as files under ``root``; keys map to relative paths."""

    # fsync and rename: nothing is held in memory, and parallel flushes share the journal's.
    commits_in_background = 4

    def __init__(self, root: str | os.PathLike[str], chunk_size: int = DEFAULT_CHUNK_SIZE) -> None:
        super().__init__(chunk_size)
        self.root = Path(root).absolute()
        self.tmp_dir = self.root / TMP_DIR

    def __repr__(self) -> str:
        return f"LocalStorage({str(self.root)!r})"

    def path_for(self, key: str) -> Path:
        """The file that holds ``key``; raises ``ValueError`` for keys outside the root."""
        validate_key(key)
        if key.split("/", 1)[0] == TMP_DIR:
            raise ValueError(f"storage key must not start with {TMP_DIR!r}: {key!r}")
        return self.root.joinpath(*key.split("/"))

    def writer(self, key: str) -> LocalObjectWriter:
        return LocalObjectWriter(self, key, self.path_for(key))

    def open(
        self, key: str, start: int = 0, end: int | None = None, *, chunk_size: int | None = None
    ) -> ObjectReader:
        check_range(start, end)
        path = self.path_for(key)
        try:
            file = path.open("rb")
        except (FileNotFoundError, NotADirectoryError, IsADirectoryError) as exc:
            raise ObjectNotFound(key) from exc
        except OSError as exc:
            raise _unavailable("open", key, exc) from exc
        try:
            size = os.fstat(file.fileno()).st_size
            first, length = resolve_range(start, end, size)
            file.seek(first)
        except OSError as exc:
            file.close()
            raise _unavailable("read", key, exc) from exc
        except BaseException:
            file.close()
            raise
        chunks = self._chunks(file, key, length, chunk_size or self.chunk_size)
        return ObjectReader(chunks, length, file.close, start=first, size=size)

    def offload_location(self, key: str) -> str:
        """The key itself, under an `alias` of the root; a missing file is found here, where
        the download can still read the record again, not by the proxy."""
        if not self.path_for(key).is_file():
            raise ObjectNotFound(key)
        return key

    def _chunks(self, file: BinaryIO, key: str, length: int, chunk_size: int) -> Iterator[bytes]:
        remaining = length
        while remaining > 0:
            try:
                data = file.read(min(chunk_size, remaining))
            except OSError as exc:
                raise _unavailable("read", key, exc) from exc
            if not data:
                raise StorageError(f"object {key!r} ended {remaining} bytes early")
            remaining -= len(data)
            yield data

    def delete(self, key: str) -> None:
        path = self.path_for(key)
        try:
            path.unlink()
        except (FileNotFoundError, NotADirectoryError, IsADirectoryError):
            return
        except OSError as exc:
            raise _unavailable("delete", key, exc) from exc
        self._prune_empty_parents(path.parent)

    def _prune_empty_parents(self, folder: Path) -> None:
        """Remove folders emptied by a delete, so ``files/<id>/`` does not pile up."""
        while folder != self.root and self.root in folder.parents:
            try:
                folder.rmdir()
            except FileNotFoundError:
                pass
            except OSError:
                return
            folder = folder.parent

    def exists(self, key: str) -> bool:
        return self.path_for(key).is_file()

    def size(self, key: str) -> int:
        path = self.path_for(key)
        try:
            stat = path.stat()
        except (FileNotFoundError, NotADirectoryError) as exc:
            raise ObjectNotFound(key) from exc
        except OSError as exc:
            raise _unavailable("stat", key, exc) from exc
        if not path.is_file():
            raise ObjectNotFound(key)
        return stat.st_size

    def iter_objects(self, prefix: str = "") -> Iterator[StoredObject]:
        folder, _, _ = prefix.rpartition("/")
        start = self.path_for(folder) if folder else self.root
        if not start.is_dir():
            return
        for dirpath, dirnames, filenames in os.walk(start):
            current = Path(dirpath)
            if current == self.root:
                dirnames[:] = [name for name in dirnames if name != TMP_DIR]
            base = current.relative_to(self.root).as_posix()
            for name in filenames:
                key = name if base == "." else f"{base}/{name}"
                if not key.startswith(prefix):
                    continue
                try:
                    stat = (current / name).stat()
                except FileNotFoundError:
                    continue  # deleted while listing
                modified = datetime.fromtimestamp(stat.st_mtime, UTC)
                yield StoredObject(key, stat.st_size, modified)

    def unfinished_uploads(
        self, older_than: datetime, keep: Container[str] = ()
    ) -> Iterator[UnfinishedUpload]:
        if not self.tmp_dir.is_dir():
            return
        for path in self.tmp_dir.iterdir():
            try:
                started = datetime.fromtimestamp(path.stat().st_mtime, UTC)
            except FileNotFoundError:
                continue
            if started < older_than:
                yield UnfinishedUpload(path.name, started)

    def discard_unfinished_upload(self, upload: UnfinishedUpload) -> None:
        (self.tmp_dir / upload.name).unlink(missing_ok=True)

    def ensure_folders(self) -> None:
        """The root and its temporary folder, readable by the service's user only."""
        self.root.mkdir(mode=_DIR_MODE, parents=True, exist_ok=True)
        self.tmp_dir.mkdir(mode=_DIR_MODE, exist_ok=True)

    def check(self) -> None:
        try:
            self.ensure_folders()
            with tempfile.TemporaryFile(dir=self.tmp_dir, prefix="check-"):
                pass
        except OSError as exc:
            raise StorageUnavailable(
                f"local storage folder {str(self.root)!r} is not writable: {exc.strerror or exc}"
            ) from exc
