"""`flask audit verify|prune|export`: the operator's side of the trail."""

from __future__ import annotations

import sys
from datetime import datetime

import click
from flask import current_app
from flask.cli import AppGroup

from app.audit import services
from app.extensions import db
from app.schemas.field_types import parse_since

audit_group = AppGroup("audit", help="Check, prune and export the audit trail.")


def _instant(value: str | None) -> datetime | None:
    if not value:
        return None
    try:
        return parse_since(value)
    except ValueError as exc:
        raise click.BadParameter(str(exc)) from None


def _taken(anchor: str | None) -> bool:
    """Whether an anchor's time, if it has one, is an instant (not, say, month 13)."""
    if anchor is None or "@" not in anchor:
        return True
    try:
        parse_since(anchor.partition("@")[2])
    except ValueError:
        return False
    return True


def _anchor(ctx: click.Context, param: click.Parameter, value: str | None) -> str | None:
    """An anchor as `verify` prints it, `<sha-256 hex>:<length>,<length>,...@<time>` (without
    `@<time>` as printed before issue 36), or a usage error (a mistyped anchor is the
    operator's slip, not a broken trail)."""
    if value is not None and (not services.ANCHOR.fullmatch(value) or not _taken(value)):
        raise click.BadParameter(
            "not an anchor that `flask audit verify` printed "
            "(64 hex digits, ':', the chains' lengths separated by commas, "
            "then '@' and the time it was taken)"
        )
    return value


@audit_group.command("verify")
@click.option(
    "--anchor",
    callback=_anchor,
    help="The anchor an earlier verify printed, kept outside the database: "
    "the chains must have grown from there.",
)
def verify_command(anchor: str | None) -> None:
    """Walk the trail; report the first entry altered, removed or inserted, or removed by a
    prune the retention (AUDIT_RETENTION_DAYS) did not allow (exit 1)."""
    retention = current_app.config["AUDIT_RETENTION_DAYS"]
    verdict = services.verify(db.session, anchor, retention)
    if verdict.ok:
        click.echo(f"audit trail intact: {verdict.checked} entries; anchor {verdict.anchor}")
        if verdict.note:
            click.echo(f"note: {verdict.note}", err=True)
        return
    where = f" at entry {verdict.seq}" if verdict.seq is not None else ""
    click.echo(f"audit trail BROKEN{where}: {verdict.problem}", err=True)
    sys.exit(1)


@audit_group.command("prune")
@click.option(
    "--days",
    type=click.IntRange(min=1),
    help="Keep this many days, at least AUDIT_RETENTION_DAYS [default: that].",
)
def prune_command(days: int | None) -> None:
    """Remove entries older than the retention period (the removal is itself an entry)."""
    retention = current_app.config["AUDIT_RETENTION_DAYS"]
    if days is not None and days < retention:
        # verify checks every prune against AUDIT_RETENTION_DAYS: a shorter one would read
        # as a forged prune. To keep less, lower the setting.
        raise click.BadParameter(
            f"keeps less than AUDIT_RETENTION_DAYS ({retention}); lower that setting instead",
            param_hint="'--days'",
        )
    days = days or retention
    removed = services.prune(db.session, days)
    click.echo(f"removed {removed} entries older than {days} days")


@audit_group.command("export")
@click.option("--since", help="From this instant on (YYYY-MM-DD or ISO 8601; UTC if no offset).")
@click.option("--until", help="Before this instant.")
@click.option("--output", "-o", type=click.File("w"), default="-", help="File [default: stdout].")
def export_command(since: str | None, until: str | None, output: click.utils.LazyFile) -> None:
    """Write entries as JSON Lines, oldest first, for a log system."""
    for line in services.export_lines(db.session, _instant(since), _instant(until)):
        output.write(line + "\n")
