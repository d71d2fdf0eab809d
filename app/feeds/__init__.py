"""Feeds of what the public can download (issue 13): Atom for releases, RSS 2.0 with the
iTunes namespace for audio and video (a podcast)."""
