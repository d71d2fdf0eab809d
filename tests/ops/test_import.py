"""`flask import DIRECTORY --owner EMAIL`: bulk import through the upload's own checks."""

from __future__ import annotations

import os
from datetime import date
from pathlib import Path

import pytest
from sqlalchemy import select
from sqlalchemy.exc import OperationalError

from app.extensions import db
from app.models import FileRecord
from app.ops.importer import path_segment, virtual_path
from tests.ops.helpers import LOCAL_ONLY, lines, storage_keys
from tests.support import samples

TYPE_NOT_ALLOWED = "type not allowed: The file field must be a file of type: pdf, txt, csv,"


def write_files(root: Path, files: dict[str, bytes]) -> Path:
    for name, data in files.items():
        path = root / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(data)
    return root


def records(app) -> dict[str, FileRecord]:
    """The stored records by original name."""
    with app.app_context():
        found = db.session.scalars(select(FileRecord)).all()
        db.session.expunge_all()
    return {record.original_name: record for record in found}


@pytest.fixture
def owner(api):
    return api.account("archiv@example.org")


@pytest.fixture
def collection(tmp_path: Path) -> Path:
    """A folder as an operator might have it: real files, one HTML page, hidden clutter."""
    return write_files(
        tmp_path / "collection",
        {
            "bericht.pdf": samples.pdf_bytes(),
            "bilder/grafik.png": samples.png_bytes(),
            "Daten 2024/werte.csv": samples.csv_bytes(),
            "seite.html": samples.html_bytes(),
            "leer.txt": b"",
            ".DS_Store": samples.jpeg_bytes(),
            ".git/objects/blob.json": samples.json_bytes(),
        },
    )


@pytest.fixture
def manifest(tmp_path: Path) -> Path:
    path = tmp_path / "manifest.csv"
    path.write_text(
        "file,titel,sperrfrist,freigabe,aktiv_id\n"
        "bericht.pdf,Jahresbericht 2024,2030-12-01,false,A-17\n"
        "bilder/grafik.png,Grafik,,,\n",
        encoding="utf-8",
    )
    return path


def run_import(runner, directory: Path, *options: str):
    return runner.invoke(args=["import", str(directory), "--owner", "archiv@example.org", *options])


def test_import_a_folder_with_a_manifest(app, runner, owner, collection, manifest):
    result = run_import(runner, collection, "--path", "archiv", "--metadata", str(manifest))
    assert result.exit_code == 1, result.output
    summary = lines(result.stdout)
    assert summary[0] == "Imported 3 files (1.7 KiB), skipped 0 (already there), rejected 2."
    assert summary[1] == "Rejected:"
    assert summary[2] == "  leer.txt: empty: The file field must not be an empty file."
    assert summary[3].startswith(f"  seite.html: {TYPE_NOT_ALLOWED}")
    assert len(summary) == 4
    assert "Importing 5 files" in result.stderr

    found = records(app)
    assert sorted(found) == ["bericht.pdf", "grafik.png", "werte.csv"]
    report, chart, values = found["bericht.pdf"], found["grafik.png"], found["werte.csv"]
    assert {r.user_id for r in found.values()} == {owner.id}
    assert (report.mime_type, chart.mime_type, values.mime_type) == (
        samples.MIME_PDF,
        samples.MIME_PNG,
        samples.MIME_CSV,
    )
    assert (report.path, chart.path, values.path) == (
        "archiv",
        "archiv/bilder",
        "archiv/Daten_2024",
    )
    assert (report.titel, report.sperrfrist, report.freigabe, report.aktiv_id) == (
        "Jahresbericht 2024",
        date(2030, 12, 1),
        False,
        "A-17",
    )
    assert (chart.titel, chart.sperrfrist, chart.freigabe) == ("Grafik", None, True)
    assert (values.titel, values.freigabe, values.reihenfolge) == (None, True, 0)
    assert report.size == len(samples.pdf_bytes())

    assert storage_keys(app) == {r.stored_path for r in found.values()}
    for record in found.values():
        assert record.stored_path.startswith(f"files/{record.id}/")


def test_imported_records_behave_like_uploaded_ones(app, runner, api, owner, collection):
    assert run_import(runner, collection).exit_code == 1
    chart = records(app)["grafik.png"]
    listed = api.get("/api/files?path=bilder", owner).get_json()
    assert [entry["id"] for entry in listed["data"]] == [str(chart.id)]
    download = api.get(f"/api/files/{chart.id}/download", owner)
    assert download.status_code == 200
    assert download.data == samples.png_bytes()
    assert download.headers["Content-Type"] == samples.MIME_PNG
    public = api.get(f"/api/public/files/{chart.id}/download")
    assert public.data == samples.png_bytes()


def test_running_again_skips_everything_already_there(app, runner, owner, collection, manifest):
    options = ("--path", "archiv", "--metadata", str(manifest))
    first = run_import(runner, collection, *options)
    assert first.exit_code == 1, first.output
    rows, objects = records(app), storage_keys(app)

    again = run_import(runner, collection, *options)
    assert again.exit_code == 1, again.output
    assert lines(again.stdout)[0] == (
        "Imported 0 files (0 B), skipped 3 (already there), rejected 2."
    )
    assert records(app).keys() == rows.keys()
    assert {r.id for r in records(app).values()} == {r.id for r in rows.values()}
    assert storage_keys(app) == objects


def test_a_clean_folder_exits_0_and_keeps_its_folders_as_paths(app, runner, owner, tmp_path):
    folder = write_files(
        tmp_path / "clean",
        {
            "oben.pdf": samples.pdf_bytes(),
            "Übersicht (alt)/Daten.json": samples.json_bytes(),
            "a/b/c/tabelle.xlsx": samples.xlsx_bytes(),
        },
    )
    result = run_import(runner, folder)
    assert result.exit_code == 0, result.output
    [summary] = lines(result.stdout)
    assert summary.startswith("Imported 3 files (")
    assert summary.endswith("), skipped 0 (already there), rejected 0.")
    found = records(app)
    assert found["oben.pdf"].path is None
    assert found["Daten.json"].path == "Uebersicht_alt"
    assert found["Daten.json"].mime_type == samples.MIME_JSON
    assert found["tabelle.xlsx"].path == "a/b/c"
    assert found["tabelle.xlsx"].mime_type == samples.MIME_XLSX


def test_the_same_content_twice_is_imported_once(app, runner, owner, tmp_path):
    data = samples.pdf_bytes()
    folder = write_files(tmp_path / "twice", {"a.pdf": data, "kopie/b.pdf": data})
    result = run_import(runner, folder)
    assert result.exit_code == 0, result.output
    assert lines(result.stdout)[0].startswith("Imported 1 file (")
    assert "skipped 1 (already there)" in result.stdout
    assert sorted(records(app)) == ["a.pdf"]
    assert len(storage_keys(app)) == 1


def test_content_of_another_owner_is_not_a_duplicate(app, runner, api, owner, tmp_path):
    other = api.account("other@example.org")
    api.create(other, "bericht.pdf", samples.pdf_bytes())
    folder = write_files(tmp_path / "f", {"bericht.pdf": samples.pdf_bytes()})
    result = run_import(runner, folder)
    assert result.exit_code == 0, result.output
    assert lines(result.stdout)[0].startswith("Imported 1 file (")
    with app.app_context():
        owners = db.session.scalars(select(FileRecord.user_id)).all()
    assert sorted(owners) == sorted([other.id, owner.id])


def test_content_uploaded_before_over_http_is_skipped(app, runner, api, owner, tmp_path):
    api.create(owner, "schon-da.pdf", samples.pdf_bytes())
    objects = storage_keys(app)
    folder = write_files(tmp_path / "f", {"bericht.pdf": samples.pdf_bytes()})
    result = run_import(runner, folder)
    assert result.exit_code == 0, result.output
    assert lines(result.stdout)[0] == (
        "Imported 0 files (0 B), skipped 1 (already there), rejected 0."
    )
    assert sorted(records(app)) == ["schon-da.pdf"]
    assert storage_keys(app) == objects


def test_invalid_manifest_values_are_rejected_with_reasons(app, runner, owner, tmp_path):
    folder = write_files(
        tmp_path / "f",
        {
            "a.pdf": samples.pdf_bytes(),
            "b.png": samples.png_bytes(),
            "c.csv": samples.csv_bytes(),
            "d.html": samples.html_bytes(),
        },
    )
    manifest = tmp_path / "m.csv"
    manifest.write_text(
        "file,sperrfrist,freigabe,reihenfolge,path,titel\n"
        "a.pdf,2026-02-30,,,,\n"
        "b.png,,vielleicht,zwei,,\n"
        f"c.csv,,,,/absolut,{'x' * 256}\n"
        "d.html,2026-13-01,,,,\n"
        "fehlt.pdf,,,,,\n",
        encoding="utf-8",
    )
    result = run_import(runner, folder, "--metadata", str(manifest))
    assert result.exit_code == 1
    summary = lines(result.stdout)
    assert summary[0] == "Imported 0 files (0 B), skipped 0 (already there), rejected 5."
    assert summary[2] == (
        "  a.pdf: invalid metadata: The sperrfrist field must be a valid date in the "
        "format YYYY-MM-DD."
    )
    name, _, reasons = summary[3].partition(": ")
    assert name == "  b.png"
    assert sorted(reasons.split("; ")) == [
        "invalid metadata: The freigabe field must be true or false.",
        "invalid metadata: The reihenfolge field must be an integer.",
    ]
    assert summary[4].startswith("  c.csv: invalid metadata: The ")
    assert "The path field format is invalid" in summary[4]
    assert "The titel field must not be greater than 255 characters." in summary[4]
    assert summary[5].startswith(f"  d.html: {TYPE_NOT_ALLOWED}")
    assert summary[5].endswith(
        "; invalid metadata: The sperrfrist field must be a valid date in the format YYYY-MM-DD."
    )
    assert summary[6] == "  fehlt.pdf: listed in the manifest, but not found in DIRECTORY"
    assert records(app) == {}
    assert storage_keys(app) == set()


def test_a_file_over_the_size_limit_is_rejected(app, runner, owner, tmp_path):
    app.config["MAX_FILE_SIZE"] = 4096
    folder = write_files(
        tmp_path / "f", {"gross.txt": b"Zeile\n" * 1000, "klein.txt": b"Zeile\n" * 10}
    )
    result = run_import(runner, folder)
    assert result.exit_code == 1
    assert lines(result.stdout) == [
        "Imported 1 file (60 B), skipped 0 (already there), rejected 1.",
        "Rejected:",
        "  gross.txt: too large: The file field must not be greater than 4 kilobytes.",
    ]
    assert sorted(records(app)) == ["klein.txt"]
    assert len(storage_keys(app)) == 1


def test_dry_run_stores_nothing_and_reports_what_would_happen(
    app, runner, api, owner, collection, manifest
):
    api.create(owner, "schon-da.pdf", samples.pdf_bytes())
    objects = storage_keys(app)
    result = run_import(runner, collection, "--metadata", str(manifest), "--dry-run")
    assert result.exit_code == 1, result.output
    summary = lines(result.stdout)
    assert summary[0] == (
        "Dry run, nothing was stored: would import 2 files (216 B), "
        "skip 1 (already there), reject 2."
    )
    assert [line.split(":")[0] for line in summary[2:]] == ["  leer.txt", "  seite.html"]
    assert "Checking 5 files" in result.stderr
    assert sorted(records(app)) == ["schon-da.pdf"]
    assert storage_keys(app) == objects


def test_unknown_owner_is_a_clear_error(app, runner, collection):
    result = runner.invoke(args=["import", str(collection), "--owner", "nobody@example.org"])
    assert result.exit_code == 2
    assert "Invalid value for '--owner': no user with the email nobody@example.org." in (
        result.output
    )
    assert records(app) == {}
    assert storage_keys(app) == set()


def test_an_invalid_path_prefix_is_refused(runner, owner, collection):
    result = run_import(runner, collection, "--path", "a//b")
    assert result.exit_code == 2
    assert "Invalid value for '--path': The path field format is invalid" in result.output


@pytest.mark.parametrize(
    ("content", "message"),
    [
        ("titel\nx\n", "the manifest has no 'file' column"),
        ("file,title\na.pdf,x\n", "the manifest has unknown column(s) title; known: file, "),
        ("file,titel\na.pdf,x\n./a.pdf,y\n", "line 3 of the manifest lists a.pdf again"),
        ("file\n../outside.pdf\n", "line 2 of the manifest names '../outside.pdf'"),
        ("file,titel\na.pdf,x,y\n", "line 2 of the manifest has more cells than its header"),
    ],
)
def test_a_broken_manifest_stops_before_anything_is_imported(
    app, runner, owner, tmp_path, content, message
):
    folder = write_files(tmp_path / "f", {"a.pdf": samples.pdf_bytes()})
    manifest = tmp_path / "m.csv"
    manifest.write_text(content, encoding="utf-8")
    result = run_import(runner, folder, "--metadata", str(manifest))
    assert result.exit_code == 2
    assert "Invalid value for '--metadata': " + message in " ".join(result.output.split())
    assert records(app) == {}


@LOCAL_ONLY
def test_an_excel_manifest_with_semicolons_inside_the_folder(app, runner, owner, tmp_path):
    folder = write_files(tmp_path / "f", {"a.pdf": samples.pdf_bytes()})
    manifest = folder / "metadaten.csv"
    manifest.write_bytes("\ufeffFile;Titel;Autoren\na.pdf;Bericht; Müller, Anna \n".encode())
    result = run_import(runner, folder, "--metadata", str(manifest))
    assert result.exit_code == 0, result.output
    [record] = records(app).values()
    assert (record.original_name, record.titel, record.autoren) == (
        "a.pdf",
        "Bericht",
        "Müller, Anna",
    )


@LOCAL_ONLY
def test_symbolic_links_never_lead_out_of_the_folder(app, runner, owner, tmp_path):
    outside = write_files(
        tmp_path / "outside", {"geheim.pdf": samples.pdf_bytes(), "ordner/x.png": b"-"}
    )
    folder = write_files(tmp_path / "f", {"echt.png": samples.png_bytes()})
    os.symlink(outside / "geheim.pdf", folder / "link.pdf")
    os.symlink(outside / "ordner", folder / "link-ordner")
    os.symlink(folder / "echt.png", folder / "alias.png")
    os.symlink(tmp_path / "missing", folder / "kaputt.pdf")
    result = run_import(runner, folder)
    assert result.exit_code == 1
    assert lines(result.stdout) == [
        "Imported 1 file (140 B), skipped 1 (already there), rejected 3.",
        "Rejected:",
        "  kaputt.pdf: broken symbolic link",
        "  link-ordner: symbolic link out of DIRECTORY, not followed",
        "  link.pdf: symbolic link out of DIRECTORY, not followed",
    ]
    # The alias is the same content as echt.png, which comes first alphabetically.
    assert sorted(records(app)) == ["alias.png"]
    assert len(storage_keys(app)) == 1


@LOCAL_ONLY
def test_an_unreadable_file_is_rejected_and_the_rest_imported(
    app, runner, owner, tmp_path, monkeypatch
):
    folder = write_files(
        tmp_path / "f", {"a.pdf": samples.pdf_bytes(), "b.png": samples.png_bytes()}
    )
    real_open = os.open

    def refuse_a_pdf(path, flags, *args, **kwargs):
        if Path(path) == folder / "a.pdf":
            raise PermissionError(13, "Permission denied", str(path))
        return real_open(path, flags, *args, **kwargs)

    # As a chmod 0 would, but also when the tests run as root.
    monkeypatch.setattr(os, "open", refuse_a_pdf)
    result = run_import(runner, folder)
    assert result.exit_code == 1
    assert lines(result.stdout)[2] == "  a.pdf: cannot read: Permission denied"
    assert sorted(records(app)) == ["b.png"]


def test_a_failed_commit_leaves_no_object_behind(app, runner, owner, tmp_path, monkeypatch):
    folder = write_files(tmp_path / "f", {"a.pdf": samples.pdf_bytes()})

    def failing_commit() -> None:
        raise OperationalError("COMMIT", {}, Exception("database went away"))

    monkeypatch.setattr(db.session, "commit", failing_commit)
    result = run_import(runner, folder)
    monkeypatch.undo()
    assert result.exit_code == 1
    assert "Error: stopped at a.pdf: (builtins.Exception) database went away." in result.output
    assert "run the import again to continue" in result.output
    assert records(app) == {}
    assert storage_keys(app) == set()


def test_help_explains_paths_manifest_and_reruns(runner):
    result = runner.invoke(args=["import", "--help"])
    assert result.exit_code == 0
    text = " ".join(result.output.split())
    for phrase in (
        "--owner",
        "--path P",
        "--metadata CSV",
        "--dry-run",
        "SHA-256",
        "archiv/Berichte_2024",
        "Hidden files and folders are skipped",
    ):
        assert phrase in text


@pytest.mark.parametrize(
    ("name", "segment"),
    [
        ("Berichte 2024", "Berichte_2024"),
        ("Übersicht (alt)", "Uebersicht_alt"),
        ("Straße", "Strasse"),
        ("café-menü", "cafe-menue"),
        ("v1.2_final", "v1.2_final"),
        ("???", "_"),
        ("..", "_"),
    ],
)
def test_folder_names_become_valid_path_segments(name, segment):
    assert path_segment(name) == segment


def test_virtual_path_combines_prefix_and_folder():
    from pathlib import PurePosixPath

    assert virtual_path(None, PurePosixPath(".")) is None
    assert virtual_path("archiv", PurePosixPath(".")) == "archiv"
    assert virtual_path("archiv/2024", PurePosixPath("a b/c")) == "archiv/2024/a_b/c"


def test_manifest_rows_for_hidden_or_missing_files_are_rejected(app, runner, owner, tmp_path):
    folder = write_files(
        tmp_path / "f", {"a.pdf": samples.pdf_bytes(), ".versteckt/b.png": samples.png_bytes()}
    )
    manifest = tmp_path / "m.csv"
    manifest.write_text("file,titel\n.versteckt/b.png,B\nsub\\fehlt.pdf,C\na.pdf,A\n")
    result = run_import(runner, folder, "--metadata", str(manifest))
    assert result.exit_code == 1
    assert lines(result.stdout) == [
        "Imported 1 file (1.5 KiB), skipped 0 (already there), rejected 2.",
        "Rejected:",
        "  .versteckt/b.png: listed in the manifest, but hidden files are not imported",
        "  sub/fehlt.pdf: listed in the manifest, but not found in DIRECTORY",
    ]
    assert [(r.original_name, r.titel) for r in records(app).values()] == [("a.pdf", "A")]
