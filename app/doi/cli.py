"""`flask doi work` (cron, or after a DataCite outage) and `flask doi status`."""

from __future__ import annotations

import click
from flask.cli import AppGroup

from app.doi import services, worker

doi_group = AppGroup("doi", help="DOIs at DataCite: work the outbox, show what is pending.")


@doi_group.command("work")
def work_command() -> None:
    """Mark due the DOIs whose embargo ended (DATACITE_REGISTER_AT=sperrfrist), then send
    what is due now; the server does this by itself after each commit that made a DOI due."""
    if not services.enabled():
        click.echo("DOIs are off (DATACITE_* not set): nothing to do.")
        return
    ended = services.mark_embargoes_ended()
    result = worker.work_due(limit=10_000)
    click.echo(
        f"Embargo over: {ended}. Done {result.done}, failed {result.failed} (retried later)."
    )


@doi_group.command("status")
def status_command() -> None:
    """List the DOIs waiting for DataCite, with its last error; exit code 1 if any failed."""
    if not services.enabled():
        click.echo("DOIs are off (DATACITE_* not set).")
        return
    rows = worker.pending()
    failing = [doi for doi in rows if doi.last_error]
    for doi in rows:
        line = f"{doi.doi}\trecord {doi.record_id}\t{doi.state or 'new'} -> {doi.wanted}"
        if doi.last_error:
            line += f"\tfailing, {doi.attempts} tries, next {doi.due_at:%Y-%m-%dT%H:%M:%SZ}"
            line += f"\t{doi.last_error}"
        else:
            line += "\tpending"
        click.echo(line)
    click.echo(f"{len(rows)} DOI(s) pending, {len(failing)} failing.")
    if failing:
        raise SystemExit(1)
