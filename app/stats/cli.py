"""`flask stats export|flush`: the operator's side of the statistics."""

from __future__ import annotations

import csv
import sys
from datetime import date

import click
from flask.cli import AppGroup

from app.stats import queries

stats_group = AppGroup("stats", help="Export the download statistics.")


def _month(ctx: click.Context, param: click.Parameter, value: str) -> date:
    try:
        year, month = value.split("-")
        return date(int(year), int(month), 1)
    except ValueError:
        raise click.BadParameter("a month such as 2026-11") from None


@stats_group.command("export")
@click.option("--month", required=True, callback=_month, help="The month, e.g. 2026-11.")
@click.option("-o", "--output", type=click.File("w"), default="-", help="File (default stdout).")
def export_command(month: date, output) -> None:
    """COUNTER-style item report of one month as CSV: Total_Item_Investigations (downloads
    and landing-page views), Total_Item_Requests and Unique_Item_Requests of every record
    that people downloaded or viewed."""
    writer = csv.writer(output or sys.stdout, lineterminator="\n")
    writer.writerow(["Item", "Title", "Metric_Type", "Month", "Count"])
    writer.writerows(queries.item_report(month))
