"""`flask serve`: the production server, waitress, configured for the service's limits."""

from __future__ import annotations

import signal
from typing import Any

import click
from flask import current_app
from flask.cli import with_appcontext


@click.command("serve")
@click.option("--host", help="Interface to listen on [default: HOST or 127.0.0.1].")
@click.option("--port", type=int, help="Port to listen on [default: PORT or 8000].")
@click.option("--threads", type=int, help="Worker threads [default: SERVER_THREADS or 8].")
@with_appcontext
def serve_command(host: str | None, port: int | None, threads: int | None) -> None:
    """Serve the API with waitress."""
    from app.server import (
        make_server,
        release_freed_memory_to_the_system,
        warn_when_links_follow_any_host,
    )

    release_freed_memory_to_the_system()
    app = current_app._get_current_object()  # type: ignore[attr-defined]
    server = make_server(
        app,
        host=host or app.config["HOST"],
        port=port or app.config["PORT"],
        threads=threads or app.config["SERVER_THREADS"],
    )
    warn_when_links_follow_any_host(app, [server.effective_host])
    click.echo(f"Serving on http://{server.effective_host}:{server.effective_port}")
    # A stop (docker stop, systemd) ends like Ctrl-C, so the exit handlers run: among them
    # the statistics' last flush (app/stats/collector.py).
    signal.signal(signal.SIGTERM, _stop)
    try:
        server.run()
    except KeyboardInterrupt:
        pass
    finally:
        server.close()


def _stop(signum: int, frame: Any) -> None:
    raise KeyboardInterrupt
