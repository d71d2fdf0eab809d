"""`flask covers make [--all]`: covers for every record that wants one, made now."""

from __future__ import annotations

import click
from flask import current_app
from flask.cli import with_appcontext
from sqlalchemy import func, select, update

from app.covers import making, services
from app.extensions import db
from app.files import deletions
from app.models import Cover, FileRecord, utcnow

BATCH = 500


@click.group("covers")
def covers_group() -> None:
    """Records' cover pictures."""


@covers_group.command("make")
@click.option("--all", "again", is_flag=True, help="Make every cover again, failed ones too.")
@with_appcontext
def make_command(again: bool) -> None:
    """Write the covers records want but lack (records from before covers), then make all
    that are due now; --all makes every one again (after an upgrade of the renderers)."""
    if not services.enabled():
        raise click.ClickException("COVERS is off")
    storage = current_app.extensions["storage"]
    last = None
    while True:
        query = select(FileRecord).order_by(FileRecord.id).limit(BATCH)
        if last is not None:
            query = query.where(FileRecord.id > last)
        records = db.session.scalars(query).all()
        if not records:
            break
        for record in records:
            services.follow(record)
        last = records[-1].id
        owed = deletions.take_owed()
        db.session.commit()
        deletions.carry_out(storage, owed)
    if again:
        db.session.execute(update(Cover).values(due_at=utcnow(), attempts=0, last_error=None))
        db.session.commit()
    made = failed = 0
    while True:
        worked = making.make_due()
        made, failed = made + worked.done, failed + worked.failed
        if worked.done + worked.failed == 0:
            break
    pictures = db.session.scalar(
        select(func.count()).select_from(Cover).where(Cover.key.is_not(None))
    )
    without = db.session.scalar(
        select(func.count()).select_from(Cover).where(Cover.key.is_(None), Cover.due_at.is_(None))
    )
    click.echo(f"covers worked: {made}, storage failures (retried later): {failed}")
    click.echo(f"covers made in all: {pictures}; files no picture can be drawn of: {without}")
