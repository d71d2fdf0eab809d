"""`flask stats export`: the operator's side of the statistics. There is no flush command: the
events are in the memory of the process that counted them, which flushes them itself
(app/stats/collector.py)."""

from __future__ import annotations

import csv
import re
import sys
from datetime import date

import click
from flask.cli import AppGroup

from app.stats import queries

stats_group = AppGroup("stats", help="Export the download statistics.")

#: What makes a spreadsheet read a cell as a formula (OWASP, "CSV Injection"): a title
#: `=HYPERLINK(...)` would run in the operator's spreadsheet.
FORMULA_STARTS = ("=", "+", "-", "@", "\t", "\r")


def spreadsheet_safe(value: object) -> object:
    """A text cell that starts like a formula with a single quote before it, which spreadsheets
    read as "text follows" and do not show; other cells as they are."""
    if isinstance(value, str) and value.startswith(FORMULA_STARTS):
        return f"'{value}"
    return value


def _month(ctx: click.Context, param: click.Parameter, value: str) -> date:
    """`YYYY-MM` in ASCII digits (`int()` would also read other scripts' digits)."""
    found = re.fullmatch(r"([0-9]{4})-([0-9]{2})", value)
    try:
        if found is None:
            raise ValueError(value)
        return date(int(found[1]), int(found[2]), 1)
    except ValueError:
        raise click.BadParameter("a month such as 2026-11") from None


@stats_group.command("export")
@click.option("--month", required=True, callback=_month, help="The month, e.g. 2026-11.")
@click.option("-o", "--output", type=click.File("w"), default="-", help="File (default stdout).")
def export_command(month: date, output) -> None:
    """COUNTER-style item report of one month as CSV: Total_Item_Investigations (downloads
    and landing-page views), Total_Item_Requests and Unique_Item_Requests of every record
    that people downloaded or viewed. A text cell that a spreadsheet would read as a formula
    (starting with `=`, `+`, `-`, `@`, a tab or a carriage return) has a `'` put before it."""
    writer = csv.writer(output or sys.stdout, lineterminator="\n")
    writer.writerow(["Item", "Title", "Metric_Type", "Month", "Count"])
    writer.writerows([spreadsheet_safe(cell) for cell in row] for row in queries.item_report(month))
