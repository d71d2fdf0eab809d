"""Tokens: issuing and revoking personal access tokens, and recognising them on requests."""
