"""Resumable uploads with the tus 1.0.0 protocol under /api/uploads (https://tus.io)."""
