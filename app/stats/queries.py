"""Reading the per-day counts: one record by day or month, records ranked, the monthly
COUNTER item report. `total` and `unique` are human requests (downloads); `machine` is counted
apart; `views` and `unique_views` are human views of the landing page."""

from __future__ import annotations

import calendar
import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass, field
from datetime import date, timedelta
from typing import Any

from flask import current_app
from sqlalchemy import ColumnElement, Select, and_, case, func, literal_column, select

from app.extensions import db
from app.models import FileRecord, StatsDaily
from app.stats.aggregation import day_of
from app.stats.events import DOORS, PAGE, PUBLIC_DOOR


def today() -> date:
    """The statistics' UTC day, by their clock (which tests move)."""
    clock = current_app.config.get("STATS_CLOCK") or time.time
    return day_of(clock())


SORTS = {"total": "total", "-total": "total", "unique": "unique", "-unique": "unique"}


@dataclass
class Counts:
    total: int = 0
    unique: int = 0
    machine: int = 0
    views: int = 0
    unique_views: int = 0
    doors: dict[str, int] = field(default_factory=lambda: dict.fromkeys(DOORS, 0))

    def add(self, door: str, machine: bool, total: int, unique: int) -> None:
        if door == PAGE:
            if not machine:  # machines reading pages are crawlers' kin: not reported
                self.views += total
                self.unique_views += unique
            return
        if machine:
            self.machine += total
            return
        self.total += total
        self.unique += unique
        self.doors[door] = self.doors.get(door, 0) + total

    def as_dict(self) -> dict[str, Any]:
        return {
            "total": self.total,
            "unique": self.unique,
            "machine": self.machine,
            "views": self.views,
            "unique_views": self.unique_views,
            "doors": self.doors,
        }


def _periods(start: date, end: date, granularity: str) -> list[str]:
    if granularity == "month":
        months, year, month = [], start.year, start.month
        while (year, month) <= (end.year, end.month):
            months.append(f"{year:04d}-{month:02d}")
            year, month = (year + 1, 1) if month == 12 else (year, month + 1)
        return months
    return [(start + timedelta(days=n)).isoformat() for n in range((end - start).days + 1)]


def record_stats(record_id: uuid.UUID, start: date, end: date, granularity: str) -> dict:
    """Totals over [start, end] and one row per day or month of it, empty ones included."""
    rows = db.session.execute(
        select(
            StatsDaily.day,
            StatsDaily.door,
            StatsDaily.machine,
            StatsDaily.total,
            StatsDaily.unique_visitors,
        ).where(StatsDaily.record_id == record_id, StatsDaily.day.between(start, end))
    )
    totals = Counts()
    periods = {name: Counts() for name in _periods(start, end, granularity)}
    for day, door, machine, total, unique in rows:
        name = day.isoformat()[:7] if granularity == "month" else day.isoformat()
        periods[name].add(door, machine, total, unique)
        totals.add(door, machine, total, unique)
    return {
        "id": record_id,
        "from": start,
        "until": end,
        "granularity": granularity,
        **totals.as_dict(),
        "periods": [{"period": name, **c.as_dict()} for name, c in periods.items()],
    }


def record_totals(record_id: uuid.UUID) -> dict[str, Any]:
    """The public figures of a record since counting began: downloads through the public door
    and views of the landing page, the only ones that happen while the public may have the
    record (`PUBLIC_DOOR`); `doors` has that door alone."""
    totals = Counts(doors={PUBLIC_DOOR: 0})
    rows = db.session.execute(
        select(
            StatsDaily.door,
            StatsDaily.machine,
            func.sum(StatsDaily.total),
            func.sum(StatsDaily.unique_visitors),
        )
        .where(StatsDaily.record_id == record_id, StatsDaily.door.in_([PUBLIC_DOOR, PAGE]))
        .group_by(StatsDaily.door, StatsDaily.machine)
    )
    for door, machine, total, unique in rows:
        totals.add(door, machine, int(total), int(unique))
    return {"id": record_id, **totals.as_dict()}


#: The page door written into a statement as a constant (a word of the code, not a value
#: sent with every execution: the record page's prepared read keeps to two parameters).
_PAGE_DOOR = literal_column(f"'{PAGE}'")


#: The public door, likewise a constant of the statement.
_PUBLIC_DOOR = literal_column(f"'{PUBLIC_DOOR}'")


def human(*, views: bool = False, public: bool = False) -> ColumnElement[bool]:
    """COUNTER's human requests (downloads) among `stats_daily` rows, or with `views` the
    human views of the landing page: the rows of those doors not counted as a machine's.
    With `public`, the downloads the public figures show: the public door's alone.
    Robots and double-clicks never reach the rows (aggregation.py). The one statement of the
    rule in SQL, for the rankings, the item report and the record page's reach; `Counts.add`
    sorts rows already read by the same rule."""
    if views:
        door = StatsDaily.door == _PAGE_DOOR
    elif public:
        door = StatsDaily.door == _PUBLIC_DOOR
    else:
        door = StatsDaily.door != _PAGE_DOOR
    return and_(StatsDaily.machine.is_(False), door)


def _human(column: Any, *, views: bool = False) -> Any:
    return func.coalesce(func.sum(case((human(views=views), column), else_=0)), 0)


def _ranked(start: date, end: date, path: str | None) -> Select[Any]:
    total = _human(StatsDaily.total).label("total")
    unique = _human(StatsDaily.unique_visitors).label("unique")
    machine_download = and_(StatsDaily.machine.is_(True), StatsDaily.door != _PAGE_DOOR)
    machine = func.coalesce(func.sum(case((machine_download, StatsDaily.total), else_=0)), 0).label(
        "machine"
    )
    views = _human(StatsDaily.total, views=True).label("views")
    query = (
        select(FileRecord.id, FileRecord.titel, FileRecord.path, total, unique, machine, views)
        .join(StatsDaily, StatsDaily.record_id == FileRecord.id)
        .where(StatsDaily.day.between(start, end))
        .group_by(FileRecord.id, FileRecord.titel, FileRecord.path)
    )
    if path:
        escaped = path.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_")
        query = query.where(FileRecord.path.like(escaped + "%", escape="\\"))
    return query


def ranked_records(
    start: date, end: date, path: str | None, sort: str, page: int, per_page: int
) -> tuple[list[dict[str, Any]], int]:
    """Per-record counts of records with any in [start, end] under `path`, sorted, one page;
    and how many records there are."""
    query = _ranked(start, end, path)
    count = db.session.execute(select(func.count()).select_from(query.subquery())).scalar_one()
    column = query.selected_columns[SORTS[sort]]
    order = column.desc() if sort.startswith("-") else column.asc()
    rows = db.session.execute(
        query.order_by(order, FileRecord.id).limit(per_page).offset((page - 1) * per_page)
    )
    return [dict(row._mapping) for row in rows], count


def item_report(month: date) -> Iterator[tuple[str, str, str, str, int]]:
    """COUNTER-style item report rows of one month, for existing records: human requests
    (downloads) and investigations (requests plus landing-page views). COUNTER's
    Unique_Item_Investigations is not given: a visitor who both viewed and downloaded is kept
    apart in each, so the two uniques cannot be merged without keeping more per visitor."""
    end = month.replace(day=calendar.monthrange(month.year, month.month)[1])  # 9999-12 too
    query = _ranked(month, end, None).order_by(FileRecord.id)
    label = month.isoformat()[:7]
    for row in db.session.execute(query.execution_options(yield_per=1000)):
        if row.total == 0 and row.views == 0:
            continue
        title = row.titel or ""
        yield str(row.id), title, "Total_Item_Investigations", label, int(row.total + row.views)
        yield str(row.id), title, "Total_Item_Requests", label, int(row.total)
        yield str(row.id), title, "Unique_Item_Requests", label, int(row.unique)
