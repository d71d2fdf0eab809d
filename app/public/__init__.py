"""Read-only access to released records, without a token."""
