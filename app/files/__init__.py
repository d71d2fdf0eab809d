"""Protected file records: upload, list, read, download, update, replace and delete."""
