"""Fast, realistic seeding of ``users`` and ``file_records``: COPY on PostgreSQL (for bench.load
and bench.pages), the app's ORM on SQLite (``seed_orm``, a few thousand records).

1,000 users own the records with a skewed (Zipf-like) spread: a few staff upload a lot, most a
little. Records look like the repository's content: reports by quarter, climate and traffic data
sets by station and year, podcasts, videos, press releases and studies, with file names, mime
types and sizes to match, aktiv_ids like ``AKT-2021-0042`` (up to 9,999 a year: at a million
records about ten files share one), ``created_at`` spread evenly over ten years, about 20 %
unreleased and 6 % with an embargo (``sperrfrist``) after the upload, part of them still in
the future.

Growing a table drops its secondary indexes, copies the new rows in, builds the indexes again
and runs ``VACUUM (ANALYZE)``, as a bulk load would; the indexes are whatever the migrations
made, so new ones are included.
"""

from __future__ import annotations

import random
import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import UTC, date, datetime, timedelta
from typing import Any

COLUMNS = (
    "id user_id stored_path checksum_sha256 original_name mime_type size aktiv_id path reprotyp "
    "titel beschreibung autoren sachschlagwoerter org_themen sperrfrist reihenfolge freigabe "
    "erstellt_von freigegeben_von created_at updated_at"
).split()
YEARS = 10
BATCH = 20_000

STATIONS = (
    "berlin-dahlem hamburg-fuhlsbuettel muenchen-stadt koeln-bonn frankfurt-main "
    "stuttgart-echterdingen dresden-klotzsche leipzig-halle hannover bremen "
    "nuernberg kiel rostock-warnemuende magdeburg erfurt-weimar mainz saarbruecken "
    "potsdam schwerin zugspitze"
).split()
CITIES = "berlin hamburg muenchen koeln frankfurt stuttgart duesseldorf leipzig dortmund".split()
SERIES = "zukunftsgespraeche datenfunk stadtklima wissenswert hintergrund".split()
EVENTS = "jahreskonferenz fachtag sommerakademie pressekonferenz webinar".split()
THEMES = "energie mobilitaet gesundheit bildung wohnen digitalisierung klima".split()
KEYWORDS = (
    "Klimawandel Niederschlag Temperatur Verkehr Pendler Energieverbrauch Luftqualität "
    "Haushalt Bevölkerung Wohnungsmarkt Digitalisierung Schulen Radverkehr Lärm Hitze"
).split()
ORG_THEMES = "Umwelt Verkehr Soziales Wirtschaft Bildung Verwaltung".split()
FIRST = "Anna Jonas Lea Paul Marie Felix Sophie Lukas Emma Ben Mia Finn Hannah Elias".split()
LAST = "Müller Schmidt Schneider Fischer Weber Meyer Wagner Becker Schulz Hoffmann".split()


@dataclass(frozen=True)
class Kind:
    weight: float
    reprotyp: str
    ext: str
    mime: str
    size_mu: float  # log-normal size in bytes: median e**mu


XLSX = "application/vnd.openxmlformats-officedocument.spreadsheetml.sheet"
KINDS = {
    "reports": Kind(25, "Bericht", "pdf", "application/pdf", 14.5),
    "klima": Kind(15, "Datensatz", "csv", "text/csv", 13.0),
    "verkehr": Kind(10, "Datensatz", "xlsx", XLSX, 13.5),
    "podcasts": Kind(8, "Podcast", "mp3", "audio/mpeg", 17.0),
    "videos": Kind(7, "Video", "mp4", "video/mp4", 18.5),
    "presse": Kind(20, "Pressemitteilung", "pdf", "application/pdf", 12.0),
    "studien": Kind(15, "Studie", "pdf", "application/pdf", 15.0),
}


def _describe(
    rnd: random.Random, kind_name: str, created: datetime, n: int
) -> tuple[str, str, str]:
    """Virtual path, title and file stem of one record."""
    year, month = created.year, created.month
    if kind_name == "reports":
        q = (month - 1) // 3 + 1
        return f"reports/{year}/q{q}", f"Quartalsbericht {year} Q{q}", f"bericht-{year}-q{q}-{n}"
    if kind_name == "klima":
        s = rnd.choice(STATIONS)
        return f"datasets/klima/{s}/{year}", f"Klimadaten {s} {year}", f"klima-{s}-{year}-{n}"
    if kind_name == "verkehr":
        c = rnd.choice(CITIES)
        title = f"Verkehrszählung {c.capitalize()} {year}"
        return f"datasets/verkehr/{c}/{year}", title, f"verkehr-{c}-{year}-{n}"
    if kind_name == "podcasts":
        series = rnd.choice(SERIES)
        return f"podcasts/{series}/{year}", f"{series.capitalize()} Folge {n}", f"{series}-{n}"
    if kind_name == "videos":
        e = rnd.choice(EVENTS)
        return f"videos/{e}/{year}", f"{e.capitalize()} {year}: Mitschnitt {n}", f"{e}-{year}-{n}"
    if kind_name == "presse":
        stem = f"pm-{year}-{month:02d}-{n}"
        return f"presse/{year}/{month:02d}", f"Pressemitteilung {n}/{year}", stem
    theme = rnd.choice(THEMES)
    return f"studien/{theme}/{year}", f"Studie {theme.capitalize()} {year}", f"studie-{theme}-{n}"


def _text(value: Any) -> str:
    """One field of COPY's text format (the generated values hold no tab, newline or \\)."""
    if value is None:
        return "\\N"
    if isinstance(value, bool):
        return "t" if value else "f"
    return str(value)


def generate(
    count: int, user_ids: list[int], seed: int, now: datetime, names: dict[int, str]
) -> Iterator[tuple]:
    """``count`` records as tuples of COLUMNS, deterministic for a seed."""
    rnd = random.Random(seed)
    span = YEARS * 365 * 86400
    kind_names = list(KINDS)
    kind_weights = [KINDS[k].weight for k in kind_names]
    owners = rnd.choices(
        user_ids, weights=[1 / (rank + 5) for rank in range(len(user_ids))], k=count
    )
    kinds = rnd.choices(kind_names, weights=kind_weights, k=count)
    for i in range(count):
        created = now - timedelta(seconds=rnd.random() * span)
        kind_name = kinds[i]
        kind = KINDS[kind_name]
        n = rnd.randint(1, 9999)
        path, title, stem = _describe(rnd, kind_name, created, n)
        record_id = uuid.UUID(int=rnd.getrandbits(128), version=4)
        released = rnd.random() < 0.8
        embargo: date | None = None
        if rnd.random() < 0.06:
            embargo = created.date() + timedelta(days=rnd.randint(30, 730))
        owner = owners[i]
        updated = min(now, created + timedelta(seconds=rnd.random() * 30 * 86400))
        yield (  # in the order of COLUMNS
            record_id, owner, f"files/{record_id}/{uuid.UUID(int=rnd.getrandbits(128), version=4)}",
            f"{rnd.getrandbits(256):064x}", f"{stem}.{kind.ext}", kind.mime,
            max(1, int(rnd.lognormvariate(kind.size_mu, 1.0))),
            f"AKT-{created.year}-{rnd.randint(1, 9999):04d}" if rnd.random() < 0.9 else None,
            path, kind.reprotyp, title,
            f"{title}. Erstellt im Rahmen des Arbeitsprogramms {created.year}; "
            f"Stand {created.date().isoformat()}.",
            f"{rnd.choice(FIRST)} {rnd.choice(LAST)}; {rnd.choice(FIRST)} {rnd.choice(LAST)}",
            ", ".join(rnd.sample(KEYWORDS, 3)), rnd.choice(ORG_THEMES), embargo,
            rnd.randint(0, 20), released, names[owner], rnd.choice(LAST) if released else None,
            created, updated,
        )  # fmt: skip


class Seeder:
    """Grows the tables of one database to a number of records."""

    def __init__(self, database_url: str, users: int = 1000, seed: int = 1) -> None:
        self.url, self.users, self.seed = database_url, users, seed
        self.user_ids: list[int] = []
        self.names: dict[int, str] = {}
        self.now = datetime.now(UTC).replace(microsecond=0)

    def _connect(self) -> Any:
        import psycopg

        return psycopg.connect(self.url, autocommit=True)

    def create_users(self) -> list[str]:
        """The users (ids after any existing ones); returns their emails, heaviest first."""
        rnd = random.Random(self.seed)
        with self._connect() as conn:
            start = conn.execute("SELECT coalesce(max(id), 0) FROM users").fetchone()[0] + 1
            emails = []
            with conn.cursor().copy(
                "COPY users (id, email, name, password_hash, is_admin, is_active, created_at, "
                "updated_at) FROM STDIN"
            ) as copy:
                for i in range(self.users):
                    user_id = start + i
                    name = f"{rnd.choice(FIRST)} {rnd.choice(LAST)}"
                    email = f"staff{i:04d}@example.org"
                    joined = (self.now - timedelta(days=rnd.randint(0, YEARS * 365))).isoformat()
                    copy.write_row((user_id, email, name, "!seeded", False, True, joined, joined))
                    self.user_ids.append(user_id)
                    self.names[user_id] = name
                    emails.append(email)
            conn.execute(
                "SELECT setval(pg_get_serial_sequence('users', 'id'), (SELECT max(id) FROM users))"
            )
        return emails

    def count(self) -> int:
        with self._connect() as conn:
            return conn.execute("SELECT count(*) FROM file_records").fetchone()[0]

    def grow_to(self, total: int) -> dict[str, float]:
        """Add records until the table holds ``total``; returns the seconds of each phase."""
        timings: dict[str, float] = {}
        existing = self.count()
        if total <= existing:
            return timings
        with self._connect() as conn:
            conn.execute("SET maintenance_work_mem = '256MB'")
            indexes = conn.execute(
                """
                SELECT i.relname, pg_get_indexdef(i.oid)
                FROM pg_index x
                JOIN pg_class i ON i.oid = x.indexrelid
                JOIN pg_class t ON t.oid = x.indrelid
                WHERE t.relname = 'file_records'
                  AND NOT EXISTS (SELECT 1 FROM pg_constraint c WHERE c.conindid = x.indexrelid)
                """
            ).fetchall()
            began = time.perf_counter()
            for name, _ in indexes:
                conn.execute(f'DROP INDEX "{name}"')
            # The generated owners exist: skip the per-row foreign key checks.
            conn.execute("SET session_replication_role = replica")
            with conn.cursor().copy(f"COPY file_records ({', '.join(COLUMNS)}) FROM STDIN") as copy:
                buffer: list[str] = []
                seed = self.seed * 1_000_003 + existing
                for row in generate(total - existing, self.user_ids, seed, self.now, self.names):
                    buffer.append("\t".join(map(_text, row)) + "\n")
                    if len(buffer) >= BATCH:
                        copy.write("".join(buffer))
                        buffer.clear()
                if buffer:
                    copy.write("".join(buffer))
            conn.execute("SET session_replication_role = DEFAULT")
            timings["copy"] = time.perf_counter() - began
            # Replica mode also skipped the triggers that keep the folder counts: recount.
            began = time.perf_counter()
            conn.execute("DELETE FROM file_path_counts")
            conn.execute(
                "INSERT INTO file_path_counts (path, freigabe, n) "
                "SELECT coalesce(path, ''), freigabe, count(*) FROM file_records "
                "GROUP BY coalesce(path, ''), freigabe"
            )
            conn.execute("DELETE FROM user_file_counts")
            conn.execute(
                "INSERT INTO user_file_counts (user_id, n) "
                "SELECT user_id, count(*) FROM file_records GROUP BY user_id"
            )
            timings["recount"] = time.perf_counter() - began
            began = time.perf_counter()
            for _, definition in indexes:
                conn.execute(definition)
            timings["indexes"] = time.perf_counter() - began
            began = time.perf_counter()
            conn.execute("VACUUM (ANALYZE) file_records")
            conn.execute("ANALYZE users")
            timings["vacuum_analyze"] = time.perf_counter() - began
        return timings

    def heaviest_user(self) -> tuple[str, int]:
        """Email and record count of the user who owns the most records."""
        with self._connect() as conn:
            email, n = conn.execute(
                "SELECT u.email, count(*) FROM file_records f JOIN users u ON u.id = f.user_id "
                "GROUP BY u.email ORDER BY count(*) DESC LIMIT 1"
            ).fetchone()
        return email, n


def seed_orm(app: Any, total: int, users: int = 50, seed: int = 1) -> None:
    """Grow the records to ``total`` through the app's session, whose flush events keep the
    search index and the citations as an upload would."""
    from sqlalchemy import func, select

    from app.extensions import db
    from app.models import FileRecord, User

    now = datetime.now(UTC).replace(microsecond=0)
    with app.app_context():
        people = list(db.session.scalars(select(User).where(User.password_hash == "!seeded")))
        if not people:
            people = [User(email=f"staff{i:04d}@example.org", password_hash="!seeded",
                           name=f"{FIRST[i % 14]} {LAST[i % 10]}")
                      for i in range(users)]  # fmt: skip
            db.session.add_all(people)
            db.session.commit()
        names = {user.id: user.name for user in people}
        existing = db.session.scalar(select(func.count()).select_from(FileRecord)) or 0
        rows = generate(total - existing, list(names), seed * 1_000_003 + existing, now, names)
        for n, row in enumerate(rows, 1):
            db.session.add(FileRecord(**dict(zip(COLUMNS, row, strict=True))))
            if n % 2000 == 0:
                db.session.commit()
        db.session.commit()
