"""The storage contract against the local folder and against S3 mocked by moto."""

from .contract import StorageContract


class TestStorageContract(StorageContract):
    """Runs every contract test once per backend (the ``storage`` fixture is parametrized)."""
