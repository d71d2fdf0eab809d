"""`flask import DIRECTORY --owner EMAIL`: bring an existing collection into the repository.

Every file takes the upload's own way in: it is streamed into storage while counted, hashed and
sampled (`stage_file`, the code an HTTP file part goes through), held to the same size limit
and type detection, its metadata is validated by the upload's schema, and its record is created
by `create_records` (object stored, row committed, object removed again if that fails).
Content the owner already has (same SHA-256) is skipped, so an interrupted import can simply
be run again.
"""

from __future__ import annotations

import csv
import hashlib
import os
import re
import stat
import sys
import time
import unicodedata
import uuid
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath
from typing import Any, BinaryIO, cast

import click
from flask import current_app
from flask.cli import with_appcontext
from sqlalchemy import select
from sqlalchemy.exc import SQLAlchemyError

from app.auth.services import find_user
from app.exceptions import ValidationFailed
from app.extensions import db
from app.files.uploads import READ_SIZE, StagedFile, stage_file
from app.files.writes import create_records, new_object_key
from app.http import validate
from app.models import FileRecord
from app.schemas.records import CreateMetadataSchema
from app.storage import ObjectWriter, Storage, StorageError

FILE_COLUMN = "file"
FILE_FIELD = "file"
MANIFEST_DELIMITERS = (",", ";", "\t")

create_schema = CreateMetadataSchema()
METADATA_COLUMNS = tuple(create_schema.fields)

_UNSAFE = re.compile(r"[^A-Za-z0-9._-]+")
_UMLAUTS = str.maketrans({"ä": "ae", "ö": "oe", "ü": "ue", "Ä": "Ae", "Ö": "Oe", "Ü": "Ue"})
_UMLAUTS.update(str.maketrans({"ß": "ss"}))
_OPEN_FLAGS = os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_NONBLOCK", 0)


class ManifestError(ValueError):
    """The manifest cannot be used as a whole; nothing is imported."""


# --- virtual paths ----------------------------------------------------------------------


def path_segment(name: str) -> str:
    """A folder name as a path segment the API accepts: `Berichte 2024` -> `Berichte_2024`.

    Umlauts are transliterated, accents dropped, every other run of characters outside
    letters, digits, `.`, `_` and `-` becomes one `_`.
    """
    text = unicodedata.normalize("NFKD", name.translate(_UMLAUTS))
    text = "".join(ch for ch in text if not unicodedata.combining(ch))
    text = _UNSAFE.sub("_", text).strip("_")
    return "_" if not text or set(text) == {"."} else text


def virtual_path(prefix: str | None, folder: PurePosixPath) -> str | None:
    """`--path` followed by the file's folder inside DIRECTORY, each folder sanitised."""
    segments = ([prefix] if prefix else []) + [path_segment(part) for part in folder.parts]
    return "/".join(segments) or None


# --- the manifest -----------------------------------------------------------------------


def manifest_key(raw: str) -> str:
    """A manifest's `file` value as a relative POSIX path; ValueError if it leaves DIRECTORY."""
    text = raw.strip().replace("\\", "/")
    path = PurePosixPath(text)
    if not text or path.is_absolute() or ".." in path.parts or not path.parts:
        raise ValueError(raw)
    return path.as_posix()


def _delimiter(header: str) -> str:
    return max(MANIFEST_DELIMITERS, key=header.count)


def load_manifest(path: Path) -> dict[str, dict[str, str]]:
    """Metadata per file from a CSV with a `file` column and metadata columns.

    UTF-8 (with or without BOM), comma, semicolon or tab separated (whichever the header uses).
    Column names are matched case-insensitively. Empty cells count as not given.
    """
    try:
        with path.open(encoding="utf-8-sig", newline="") as handle:
            header = handle.readline()
            handle.seek(0)
            reader = csv.DictReader(handle, delimiter=_delimiter(header))
            columns = [(name or "").strip().lower() for name in reader.fieldnames or ()]
            _check_columns(columns)
            reader.fieldnames = columns
            rows: dict[str, dict[str, str]] = {}
            lines: dict[str, int] = {}
            for row in reader:
                rows_key, values = _manifest_row(row, reader.line_num, lines)
                rows[rows_key] = values
    except UnicodeDecodeError:
        raise ManifestError("the manifest is not UTF-8 text") from None
    except csv.Error as exc:
        raise ManifestError(f"the manifest is not valid CSV: {exc}") from None
    return rows


def _check_columns(columns: list[str]) -> None:
    if FILE_COLUMN not in columns:
        raise ManifestError(f"the manifest has no '{FILE_COLUMN}' column")
    duplicates = sorted({name for name in columns if columns.count(name) > 1})
    if duplicates:
        raise ManifestError(f"the manifest repeats the column(s) {', '.join(duplicates)}")
    unknown = [name for name in columns if name != FILE_COLUMN and name not in METADATA_COLUMNS]
    if unknown:
        raise ManifestError(
            f"the manifest has unknown column(s) {', '.join(unknown) or repr('')}; "
            f"known: {FILE_COLUMN}, {', '.join(METADATA_COLUMNS)}"
        )


def _manifest_row(
    row: dict[str | None, Any], line: int, lines: dict[str, int]
) -> tuple[str, dict[str, str]]:
    if row.get(None):
        raise ManifestError(f"line {line} of the manifest has more cells than its header")
    raw = row.get(FILE_COLUMN) or ""
    try:
        key = manifest_key(raw)
    except ValueError:
        raise ManifestError(
            f"line {line} of the manifest names {raw.strip()!r}, which is not a path inside "
            "DIRECTORY"
        ) from None
    if key in lines:
        raise ManifestError(
            f"line {line} of the manifest lists {key} again (first on line {lines[key]})"
        )
    lines[key] = line
    values = {
        name: value
        for name, value in row.items()
        if name and name != FILE_COLUMN and value is not None and value.strip()
    }
    return key, values


# --- finding the files ------------------------------------------------------------------


@dataclass(frozen=True)
class Candidate:
    """A regular file to import: its path relative to DIRECTORY and what to open."""

    relative: str
    source: Path
    size: int

    @property
    def name(self) -> str:
        return PurePosixPath(self.relative).name

    @property
    def folder(self) -> PurePosixPath:
        return PurePosixPath(self.relative).parent


def _inside(path: Path, root: Path) -> bool:
    return path == root or root in path.parents


def find_files(root: Path, exclude: Path | None = None) -> tuple[list[Candidate], dict[str, str]]:
    """Every non-hidden regular file under `root`, and the entries that cannot be imported.

    Hidden files and folders (a name starting with `.`) are passed over. Symbolic links are
    never followed out of `root`: a link to a file inside it is imported under the link's name,
    a link to a folder is not descended into (its files are found where they really are).
    """
    candidates: list[Candidate] = []
    problems: dict[str, str] = {}

    def unreadable(exc: OSError) -> None:
        folder = Path(exc.filename)
        problems[_relative(folder, root)] = f"cannot read folder: {exc.strerror or exc}"

    for dirpath, dirnames, filenames in os.walk(root, onerror=unreadable):
        current = Path(dirpath)
        descend = []
        for name in sorted(dirnames):
            full = current / name
            if name.startswith("."):
                continue
            if full.is_symlink():
                if not _inside(_resolved(full), root):
                    problems[_relative(full, root)] = "symbolic link out of DIRECTORY, not followed"
                continue
            descend.append(name)
        dirnames[:] = descend
        for name in sorted(filenames):
            full = current / name
            if name.startswith(".") or full == exclude:
                continue
            relative = _relative(full, root)
            found = _candidate(full, relative, root)
            if isinstance(found, Candidate):
                candidates.append(found)
            else:
                problems[relative] = found
    candidates.sort(key=lambda candidate: candidate.relative)
    return candidates, problems


def _resolved(path: Path) -> Path:
    try:
        return path.resolve()
    except (OSError, RuntimeError):  # a loop of links
        return path


def _relative(path: Path, root: Path) -> str:
    return path.relative_to(root).as_posix()


def _candidate(full: Path, relative: str, root: Path) -> Candidate | str:
    try:
        info = full.lstat()
        source = full
        if stat.S_ISLNK(info.st_mode):
            try:
                source = full.resolve(strict=True)
            except (OSError, RuntimeError):
                return "broken symbolic link"
            if not _inside(source, root):
                return "symbolic link out of DIRECTORY, not followed"
            info = source.stat()
    except OSError as exc:
        return f"cannot read: {exc.strerror or exc}"
    if not stat.S_ISREG(info.st_mode):
        return "not a regular file"
    return Candidate(relative, source, info.st_size)


# --- progress ---------------------------------------------------------------------------


def format_bytes(count: float) -> str:
    for unit in ("B", "KiB", "MiB", "GiB"):
        if count < 1024 or unit == "GiB":
            return f"{count:.0f} {unit}" if unit == "B" else f"{count:.1f} {unit}"
        count /= 1024
    raise AssertionError("unreachable")


class Progress:
    """Files, bytes and rate, drawn by click's progress bar (on a terminal only)."""

    def __init__(self, files: int, total: int) -> None:
        self.bar: Any = None
        self.files = files
        self.total = total
        self.done_files = 0
        self.done_bytes = 0
        self.budget = 0
        self.started = time.monotonic()

    def start_file(self, size: int) -> None:
        self.budget = size

    def advance(self, count: int) -> None:
        """Count bytes read; a file read twice (hashed, then stored) counts once."""
        count = min(count, self.budget)
        if count:
            self.budget -= count
            self.done_bytes += count
            self.bar.update(count)

    def finish_file(self) -> None:
        self.advance(self.budget)
        self.done_files += 1
        self.bar.render_progress()

    def status(self, _item: object = None) -> str:
        elapsed = max(time.monotonic() - self.started, 1e-6)
        return (
            f"{self.done_files}/{self.files} files, {format_bytes(self.done_bytes)} of "
            f"{format_bytes(self.total)}, {format_bytes(self.done_bytes / elapsed)}/s"
        )


class _CountingReader:
    """A file whose reads are reported to the progress bar."""

    def __init__(self, file: BinaryIO, progress: Progress) -> None:
        self.file = file
        self.progress = progress

    def read(self, size: int = -1) -> bytes:
        chunk = self.file.read(size)
        self.progress.advance(len(chunk))
        return chunk


class _DiscardingWriter(ObjectWriter):
    """Stands in for storage in a dry run and for files already known to be rejected."""

    def write(self, chunk: bytes) -> None:
        self._check_open()
        self.size += len(chunk)

    def commit(self) -> None:
        self._check_open()
        self.committed = True

    def abort(self) -> None:
        if not self.committed:
            self.aborted = True


# --- the import -------------------------------------------------------------------------


@dataclass
class ImportReport:
    imported: list[str] = field(default_factory=list)
    imported_bytes: int = 0
    skipped: list[str] = field(default_factory=list)
    rejected: list[tuple[str, list[str]]] = field(default_factory=list)


class ImportAborted(Exception):
    """Storage or database failed: the import stops; what was imported stays."""

    def __init__(self, relative: str, cause: Exception) -> None:
        super().__init__(f"{relative}: {cause}")
        self.relative = relative
        self.cause = cause


def _file_reason(staged: StagedFile, max_size: int) -> str:
    if staged.size > max_size:
        kind = "too large"
    elif staged.size == 0:
        kind = "empty"
    else:
        kind = "type not allowed"
    return f"{kind}: {staged.error}"


def _metadata_reasons(errors: dict[str, list[str]]) -> list[str]:
    """Each message; one inside a structured field (`creators.0.orcid`) names where."""
    return [
        f"invalid metadata: {key + ': ' if '.' in key else ''}{message}"
        for key, messages in errors.items()
        for message in messages
    ]


class Importer:
    """Imports candidates one at a time; each file is its own transaction."""

    def __init__(
        self,
        owner_id: int,
        storage: Storage,
        *,
        max_size: int,
        path_prefix: str | None,
        dry_run: bool,
        progress: Progress,
    ) -> None:
        self.owner_id = owner_id
        self.storage = storage
        self.max_size = max_size
        self.path_prefix = path_prefix
        self.dry_run = dry_run
        self.progress = progress
        self.report = ImportReport()
        self.seen: set[str] = set()

    def run(self, candidates: list[Candidate], manifest: dict[str, dict[str, str]]) -> None:
        for candidate in candidates:
            self.progress.start_file(candidate.size)
            try:
                self.import_file(candidate, manifest.get(candidate.relative, {}))
            except OSError as exc:
                self.reject(candidate.relative, [f"cannot read: {exc.strerror or exc}"])
            except (StorageError, SQLAlchemyError) as exc:
                db.session.rollback()
                raise ImportAborted(candidate.relative, exc) from exc
            self.progress.finish_file()

    def reject(self, relative: str, reasons: list[str]) -> None:
        self.report.rejected.append((relative, reasons))

    def metadata_for(self, candidate: Candidate, row: dict[str, str]) -> dict[str, str]:
        values = dict(row)
        if "path" not in values:
            path = virtual_path(self.path_prefix, candidate.folder)
            if path is not None:
                values["path"] = path
        return values

    def import_file(self, candidate: Candidate, row: dict[str, str]) -> None:
        metadata, metadata_errors = validate(create_schema, self.metadata_for(candidate, row))
        with self._open(candidate) as file:
            if self._known_before_storing(candidate, file):
                self.report.skipped.append(candidate.relative)
                return
            # As for an upload: no transaction stays open while the bytes stream.
            db.session.rollback()
            record_id = uuid.uuid4()
            key = new_object_key(record_id)
            # Nothing is stored for a file that will be rejected or in a dry run.
            store = not self.dry_run and not metadata_errors
            writer = self.storage.writer(key) if store else _DiscardingWriter(key)
            reader = cast(BinaryIO, _CountingReader(file, self.progress))
            staged = stage_file(
                reader, candidate.name, writer, max_size=self.max_size, field=FILE_FIELD
            )
        reasons = [_file_reason(staged, self.max_size)] if staged.error else []
        reasons += _metadata_reasons(metadata_errors)
        if reasons:
            self.reject(candidate.relative, reasons)
            return
        if self._known(staged.sha256):
            # Someone stored the same content meanwhile (or it changed while being read).
            if store:
                self.storage.delete(key)
            self.report.skipped.append(candidate.relative)
            return
        if store:
            # The service of `POST /api/files`; it removes the object if the insert fails,
            # or if what the metadata names (a series, a linked record) is not there.
            try:
                create_records(self.owner_id, [(record_id, staged)], metadata, self.storage)
            except ValidationFailed as exc:
                self.reject(candidate.relative, _metadata_reasons(exc.errors))
                return
        self.seen.add(staged.sha256)
        self.report.imported.append(candidate.relative)
        self.report.imported_bytes += staged.size

    def _open(self, candidate: Candidate) -> BinaryIO:
        fd = os.open(candidate.source, _OPEN_FLAGS)
        try:
            if not stat.S_ISREG(os.fstat(fd).st_mode):
                raise OSError(0, "not a regular file")
            return os.fdopen(fd, "rb")
        except BaseException:
            os.close(fd)
            raise

    def _known_before_storing(self, candidate: Candidate, file: BinaryIO) -> bool:
        """Whether the owner has this content already; hashed first only if a size matches.

        Reading twice costs less than storing an object only to delete it again, and a first
        import rarely meets a record of the very same size.
        """
        if candidate.size == 0 or not self._has_size(candidate.size):
            return False
        hasher = hashlib.sha256()
        for chunk in _chunks(file):
            hasher.update(chunk)
            self.progress.advance(len(chunk))
        file.seek(0)
        return self._known(hasher.hexdigest())

    def _has_size(self, size: int) -> bool:
        query = select(FileRecord.id).where(
            FileRecord.user_id == self.owner_id, FileRecord.size == size
        )
        return db.session.scalars(query.limit(1)).first() is not None

    def _known(self, checksum: str) -> bool:
        if checksum in self.seen:
            return True
        query = select(FileRecord.id).where(
            FileRecord.user_id == self.owner_id, FileRecord.checksum_sha256 == checksum
        )
        return db.session.scalars(query.limit(1)).first() is not None


def _chunks(file: BinaryIO) -> Iterator[bytes]:
    while chunk := file.read(READ_SIZE):
        yield chunk


def missing_from_manifest(
    manifest: dict[str, dict[str, str]], candidates: list[Candidate], problems: dict[str, str]
) -> list[tuple[str, list[str]]]:
    """Manifest entries that name no importable file."""
    found = {candidate.relative for candidate in candidates} | problems.keys()
    missing = []
    for key in sorted(manifest.keys() - found):
        if any(part.startswith(".") for part in PurePosixPath(key).parts):
            reason = "listed in the manifest, but hidden files are not imported"
        else:
            reason = "listed in the manifest, but not found in DIRECTORY"
        missing.append((key, [reason]))
    return missing


# --- the command ------------------------------------------------------------------------


def _plural(count: int, noun: str) -> str:
    return f"{count} {noun}" if count == 1 else f"{count} {noun}s"


def summary_lines(report: ImportReport, dry_run: bool) -> list[str]:
    imported = f"{_plural(len(report.imported), 'file')} ({format_bytes(report.imported_bytes)})"
    skipped = f"{len(report.skipped)} (already there)"
    if dry_run:
        head = (
            f"Dry run, nothing was stored: would import {imported}, skip {skipped}, "
            f"reject {len(report.rejected)}."
        )
    else:
        head = f"Imported {imported}, skipped {skipped}, rejected {len(report.rejected)}."
    lines = [head]
    if report.rejected:
        lines.append("Rejected:")
        lines += [f"  {name}: {'; '.join(reasons)}" for name, reasons in report.rejected]
    return lines


def _check_prefix(prefix: str | None) -> str | None:
    if prefix is None:
        return None
    loaded, errors = validate(create_schema, {"path": prefix})
    if errors:
        raise click.BadParameter(" ".join(errors["path"]), param_hint="'--path'")
    return loaded.get("path")


@click.command("import")
@click.argument(
    "directory",
    type=click.Path(exists=True, file_okay=False, resolve_path=True, path_type=Path),
)
@click.option("--owner", "owner_email", required=True, help="Email of the owning account.")
@click.option(
    "--path",
    "path_prefix",
    metavar="P",
    help="Virtual path prefix; each file's folder inside DIRECTORY is appended.",
)
@click.option(
    "--metadata",
    "manifest_path",
    metavar="CSV",
    type=click.Path(exists=True, dir_okay=False, resolve_path=True, path_type=Path),
    help="Manifest: a 'file' column (path inside DIRECTORY) and metadata columns.",
)
@click.option("--dry-run", is_flag=True, help="Check every file and the manifest, store nothing.")
@with_appcontext
def import_command(
    directory: Path,
    owner_email: str,
    path_prefix: str | None,
    manifest_path: Path | None,
    dry_run: bool,
) -> None:
    """Import the files under DIRECTORY as records of one account.

    Each file goes through the same checks as an upload: type detected from its bytes, the
    size limit, no empty files, metadata validated like the form fields. Files the owner
    already has (same SHA-256) are skipped, so running the import again is safe.

    \b
    Virtual path: --path P plus the file's folder inside DIRECTORY, each folder name made
    path-safe (umlauts transliterated, other characters outside A-Z a-z 0-9 . _ - become _):
    DIRECTORY/Berichte 2024/a.pdf with --path archiv gets the path archiv/Berichte_2024.
    A 'path' value in the manifest replaces this for its file.

    \b
    Manifest (--metadata): UTF-8 CSV, comma or semicolon separated, with a 'file' column and
    any of the metadata fields (titel, aktiv_id, sperrfrist, freigabe, reihenfolge, ...);
    creators, related_identifiers and series as JSON text, as in an upload's form (a series
    must exist, a linked record be the owner's or public). Empty cells leave a field unset.
    Files not listed are imported without metadata.

    Hidden files and folders are skipped; symbolic links never lead out of DIRECTORY. Ends
    with a summary; exits 1 if any file was rejected.
    """
    owner = find_user(owner_email)
    if owner is None:
        raise click.BadParameter(f"no user with the email {owner_email}.", param_hint="'--owner'")
    prefix = _check_prefix(path_prefix)
    try:
        manifest = load_manifest(manifest_path) if manifest_path else {}
    except ManifestError as exc:
        raise click.BadParameter(str(exc), param_hint="'--metadata'") from None

    candidates, problems = find_files(directory, exclude=manifest_path)
    total = sum(candidate.size for candidate in candidates)
    verb = "Checking" if dry_run else "Importing"
    label = f"{verb} {_plural(len(candidates), 'file')} ({format_bytes(total)}) for {owner.email}"
    progress = Progress(len(candidates), total)
    with click.progressbar(
        length=total,
        label=label,
        file=sys.stderr,
        item_show_func=progress.status,
    ) as bar:
        progress.bar = bar
        importer = Importer(
            owner.id,
            current_app.extensions["storage"],
            max_size=current_app.config["MAX_FILE_SIZE"],
            path_prefix=prefix,
            dry_run=dry_run,
            progress=progress,
        )
        try:
            importer.run(candidates, manifest)
        except ImportAborted as exc:
            report = importer.report
            click.echo("\n".join(summary_lines(report, dry_run)))
            cause = str(exc.cause).splitlines()[0] if str(exc.cause) else type(exc.cause).__name__
            raise click.ClickException(
                f"stopped at {exc.relative}: {cause}. Files imported so far stay; "
                "run the import again to continue."
            ) from None

    report = importer.report
    report.rejected += [(name, [reason]) for name, reason in sorted(problems.items())]
    report.rejected += missing_from_manifest(manifest, candidates, problems)
    report.rejected.sort(key=lambda item: item[0])
    click.echo("\n".join(summary_lines(report, dry_run)))
    if report.rejected:
        raise click.exceptions.Exit(1)
