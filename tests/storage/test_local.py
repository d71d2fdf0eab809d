"""What only the local-folder backend does: temp files, private modes, folder layout."""

from __future__ import annotations

import io
import os
import stat
from pathlib import Path

import pytest

from app.storage import LocalStorage, ObjectNotFound, StorageUnavailable
from app.storage.local import TMP_DIR

from .contract import AbandonedUploadsContract
from .helpers import pending_uploads

KEY = "files/3f2b8c1e/9d7e6a52"


def test_key_maps_to_a_file_under_the_root(local_storage: LocalStorage) -> None:
    local_storage.put(KEY, io.BytesIO(b"content"))
    assert (local_storage.root / "files" / "3f2b8c1e" / "9d7e6a52").read_bytes() == b"content"


@pytest.mark.parametrize("key", [".tmp/upload-x", ".tmp"])
def test_keys_inside_the_temp_folder_are_rejected(local_storage: LocalStorage, key: str) -> None:
    with pytest.raises(ValueError):
        local_storage.writer(key)
    with pytest.raises(ValueError):
        local_storage.open(key)


def test_write_goes_to_a_temp_file_until_commit(local_storage: LocalStorage) -> None:
    writer = local_storage.writer(KEY)
    writer.write(b"partial")
    assert writer.tmp_path.parent == local_storage.root / TMP_DIR
    assert pending_uploads(local_storage) == [writer.tmp_path.name]
    assert list(local_storage.iter_keys()) == []  # the temp folder is not listed

    writer.commit()
    assert pending_uploads(local_storage) == []
    assert list(local_storage.iter_keys()) == [KEY]


def test_stored_files_are_private(local_storage: LocalStorage) -> None:
    local_storage.put(KEY, io.BytesIO(b"secret"))
    mode = (local_storage.root / KEY).stat().st_mode
    assert stat.S_IMODE(mode) & 0o077 == 0


def test_delete_removes_emptied_folders_but_not_the_root(local_storage: LocalStorage) -> None:
    local_storage.put(KEY, io.BytesIO(b"a"))
    local_storage.put("files/other/x", io.BytesIO(b"b"))
    local_storage.delete(KEY)
    assert not (local_storage.root / "files" / "3f2b8c1e").exists()
    assert (local_storage.root / "files" / "other" / "x").exists()

    local_storage.delete("files/other/x")
    assert sorted(os.listdir(local_storage.root)) == [TMP_DIR]


def test_a_folder_is_not_an_object(local_storage: LocalStorage) -> None:
    local_storage.put(KEY, io.BytesIO(b"a"))
    local_storage.delete("files/3f2b8c1e")  # a folder: nothing to delete, no error
    assert local_storage.exists(KEY)
    with pytest.raises(ValueError):
        local_storage.open("files/")


def test_reader_holds_the_file_until_closed(local_storage: LocalStorage) -> None:
    local_storage.put(KEY, io.BytesIO(b"x" * (local_storage.chunk_size + 1)))
    reader = local_storage.open(KEY)
    file = reader._release.__self__  # type: ignore[attr-defined]  # the open file's close()
    assert not file.closed
    reader.close()
    assert file.closed


def test_commit_into_a_replaced_object_keeps_readers_consistent(
    local_storage: LocalStorage,
) -> None:
    """A download in progress keeps reading the old bytes while a replace commits."""
    local_storage.put(KEY, io.BytesIO(b"old" * 100_000))
    with local_storage.open(KEY) as reader:
        local_storage.put(KEY, io.BytesIO(b"new"))
        assert reader.read_all() == b"old" * 100_000
    with local_storage.open(KEY) as reader:
        assert reader.read_all() == b"new"


def test_check_creates_the_root(tmp_path: Path) -> None:
    storage = LocalStorage(tmp_path / "not" / "yet")
    storage.check()
    assert (tmp_path / "not" / "yet").is_dir()


def test_check_fails_when_the_root_is_unusable(tmp_path: Path) -> None:
    (tmp_path / "a-file").write_bytes(b"")
    storage = LocalStorage(tmp_path / "a-file")
    with pytest.raises(StorageUnavailable, match="not writable"):
        storage.check()
    with pytest.raises(StorageUnavailable):
        storage.writer(KEY)


def test_chunk_size_is_a_parameter(tmp_path: Path) -> None:
    storage = LocalStorage(tmp_path, chunk_size=64 * 1024)
    storage.put(KEY, io.BytesIO(b"y" * (200 * 1024)))
    with storage.open(KEY) as reader:
        assert [len(chunk) for chunk in reader] == [65536, 65536, 65536, 8192]
    with pytest.raises(ValueError):
        LocalStorage(tmp_path, chunk_size=1024)


class TestLocalAbandonedUploads(AbandonedUploadsContract):
    @pytest.fixture
    def storage(self, tmp_path):
        return LocalStorage(tmp_path / "root")


def test_the_offload_location_is_the_key_of_an_existing_file(local_storage: LocalStorage):
    """nginx's `alias` of the root finds the file under the key; a missing file is the
    service's to find, where the download can still read its record again."""
    local_storage.put("files/a/b", io.BytesIO(b"content"))
    assert local_storage.offload_location("files/a/b") == "files/a/b"
    with pytest.raises(ObjectNotFound):
        local_storage.offload_location("files/a/missing")
    with pytest.raises(ValueError):
        local_storage.offload_location("files/../../etc/passwd")
