"""Signals: a package tells what happened to whoever listens, without importing it.

`downloaded`: a download door answered (sender: the app; `door`, `record_id`, `status`,
`user_id` as `app.stats.count_download` takes them). Sent by the account's door (app/files),
which the statistics (app/stats, a layer above it) count; they listen from their `init_app`.
"""

from __future__ import annotations

from blinker import Namespace

_signals = Namespace()

downloaded = _signals.signal("downloaded")
