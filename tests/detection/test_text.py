"""Text types: the content decides what is possible, the name only picks among those."""

from __future__ import annotations

import json

import pytest

from app.detection import HEAD_BYTES, TAIL_BYTES
from tests.support import samples

from .helpers import detect, rejection

RDF_OPEN = f'<rdf:RDF xmlns:rdf="{samples.RDF_NAMESPACE}">'


@pytest.mark.parametrize(
    ("data", "filename", "mime_type"),
    [
        (samples.json_bytes(), "data.txt", "text/plain"),
        (samples.json_bytes(), "data.csv", "application/json"),
        (samples.json_bytes(), "data.json", "application/json"),
        (samples.csv_bytes(), "table.txt", "text/plain"),
        (samples.csv_bytes(), "table.json", "text/csv"),
        (samples.csv_bytes(), "table.CSV", "text/csv"),
        (samples.text_bytes(), "notes.csv", "text/plain"),
        (samples.text_bytes(), "notes.json", "text/plain"),
        (samples.text_bytes(), "notes.rdf", "text/plain"),
        (samples.rdf_bytes(), "graph.txt", "application/rdf+xml"),
        (samples.rdf_bytes(), "graph.xml", "application/rdf+xml"),
        (samples.latin1_text_bytes(), "notes.json", "text/plain"),
        (samples.pdf_bytes(), "document.txt", "application/pdf"),
        (samples.zip_bytes(), "archive.csv", "application/zip"),
    ],
)
def test_name_chooses_only_among_types_the_content_supports(
    data: bytes, filename: str, mime_type: str
) -> None:
    assert detect(data, filename) == mime_type


def test_name_is_taken_from_the_last_path_segment() -> None:
    assert detect(samples.csv_bytes(), "dir.csv/table.txt") == "text/plain"
    assert detect(samples.csv_bytes(), "C:\\dir.txt\\table.csv") == "text/csv"
    assert detect(samples.csv_bytes(), ".csv") == "text/csv"


@pytest.mark.parametrize(
    "data",
    [
        b"a,b,c\n1,2\n3,4,5\n",
        b"only one column\nanother line\n",
        b"a single,line\n",
        b'a,"unterminated\n1,2\n',
        b"a\tb\n1\t2\n",
    ],
    ids=["ragged", "one-column", "one-row", "bad-quoting", "tab-separated"],
)
def test_text_that_is_not_consistent_csv_is_plain_text(data: bytes) -> None:
    assert detect(data, "table.csv") == "text/plain"
    assert detect(data) == "text/plain"


def test_csv_with_quoted_delimiters_and_newlines() -> None:
    data = b'id,text\n1,"a, b"\n2,"two\nlines"\n'
    assert detect(data) == "text/csv"


@pytest.mark.parametrize(
    "data",
    [b'"just a string"', b"42", b"true", b"[NaN]", b'{"a": 1', b"{'a': 1}"],
    ids=["string", "number", "literal", "nan", "truncated", "single-quotes"],
)
def test_json_must_be_a_strict_object_or_array(data: bytes) -> None:
    assert detect(data, "data.json") == "text/plain"


def test_json_must_be_utf8() -> None:
    data = json.dumps({"name": "Grüße"}, ensure_ascii=False).encode("cp1252")
    assert detect(data, "data.json") == "text/plain"


def test_json_larger_than_the_head_is_judged_by_its_ends() -> None:
    data = samples.big_json_bytes()
    assert len(data) > HEAD_BYTES

    assert detect(data) == "application/json"
    assert detect(data, "export.json") == "application/json"
    assert detect(data, "export.txt") == "text/plain"


def test_large_text_whose_ends_do_not_match_is_not_json() -> None:
    data = samples.big_json_bytes()[:-3] + b"\nx\n"
    assert detect(data, "export.json") == "text/plain"


def test_large_csv_is_judged_by_the_complete_records_in_the_head() -> None:
    row = '2024-01-01;Müller;"Text; mit Trenner";42\n'.encode()
    data = b"datum;name;text;wert\n" + row * (3 * HEAD_BYTES // len(row))

    assert detect(data, "export.csv") == "text/csv"
    assert detect(data) == "text/csv"


def test_multibyte_character_cut_at_the_head_boundary_is_tolerated() -> None:
    data = b"a" + "ä".encode() * (HEAD_BYTES // 2 + 1000) + b"z"
    assert data[HEAD_BYTES - 1] == 0xC3  # the head ends with half a character
    assert data[len(data) - TAIL_BYTES] == 0xA4  # and the tail starts with the other half

    assert detect(data) == "text/plain"
    document = b'{"k": "' + "ä".encode() * (HEAD_BYTES // 2 + 1000) + b'"}'
    assert document[HEAD_BYTES - 1] == 0xC3
    assert detect(document) == "application/json"


@pytest.mark.parametrize(
    "data",
    [
        b"text with a \x00 NUL byte\n",
        b"text with an escape \x1b[31m sequence\n",
        b"bell \x07\n",
        b"\x81\x8d undefined in cp1252 and invalid UTF-8\n",
        "UTF-16 text".encode("utf-16"),
    ],
    ids=["nul", "escape", "bell", "undefined-bytes", "utf-16"],
)
def test_text_with_control_characters_or_undecodable_bytes_is_refused(data: bytes) -> None:
    assert rejection(data, "notes.txt") == "The file type could not be recognised."


def test_form_feed_tabs_and_crlf_are_text() -> None:
    assert detect(b"a\tb\r\n\fnext page\r\n") == "text/plain"


def test_binary_data_in_the_tail_of_a_large_text_is_refused() -> None:
    data = b"hello world\n" * (HEAD_BYTES // 10) + b"\x00\x01\x02binary"
    rejection(data, "notes.txt")


@pytest.mark.parametrize(
    ("data", "reason"),
    [
        (samples.html_bytes(), "HTML documents are not allowed."),
        (b"<html><body>hi</body></html>", "HTML documents are not allowed."),
        (b"  <!doctype HTML>\n<p>x", "HTML documents are not allowed."),
        (b'<html xmlns="http://www.w3.org/1999/xhtml"/>', "HTML documents are not allowed."),
        (b'<x:p xmlns:x="http://www.w3.org/1999/xhtml"/>', "HTML documents are not allowed."),
        (samples.svg_bytes(), "SVG images are not allowed."),
        (b"<svg><rect/></svg>", "SVG images are not allowed."),
        (b"<script>alert(1)</script>", "Scripts are not allowed."),
        (b"<script>if (a < b) alert(1)</script>", "Scripts are not allowed."),
        (b"#!/usr/bin/env python\nprint(1)\n", "Scripts are not allowed."),
        (b"<?php system($_GET['c']); ?>", "PHP scripts are not allowed."),
        (samples.xml_bytes(), "HTML and XML documents other than RDF/XML are not allowed."),
        (b"<div>fragment</div>", "HTML and XML documents other than RDF/XML are not allowed."),
        (b"<p>unclosed <b>html", "HTML and XML documents other than RDF/XML are not allowed."),
        (
            b"<!-- comment -->\n<note/>",
            "HTML and XML documents other than RDF/XML are not allowed.",
        ),
    ],
)
def test_markup_is_refused_with_a_reason(data: bytes, reason: str) -> None:
    assert rejection(data) == reason
    assert rejection(data, "notes.txt") == reason


@pytest.mark.parametrize(
    "marker",
    [
        b"<script src=x>",
        b"<SCRIPT>",
        b"<html>",
        b"<svg onload=alert(1)>",
        b"<iframe src=x>",
        b"<body onload=x>",
        b"< script>",
    ],
)
def test_markup_anywhere_in_text_or_csv_is_refused(marker: bytes) -> None:
    assert "is not allowed" in rejection(b"Harmless first line\n" + marker + b"\n", "a.txt")
    assert "is not allowed" in rejection(b"a,b\n1," + marker + b"\n", "a.csv")


def test_markup_at_the_end_of_a_large_text_is_refused() -> None:
    data = b"harmless line\n" * (HEAD_BYTES // 7) + b"<script>alert(1)</script>\n"
    assert "script" in rejection(data, "log.txt")


def test_text_resembling_other_signatures_is_text() -> None:
    assert detect(b"Get free stuff, skip the rest.\n") == "text/plain"
    assert detect(b"ID3 tags describe audio files.\n") == "text/plain"
    assert detect(b"RIFF files hold WAVE data.\n") == "text/plain"
    assert detect(b"BM is also a bitmap signature.\n") == "text/plain"


def test_mentions_of_markup_that_are_not_tags_are_text() -> None:
    data = b"Use a < b and 3 > 2; the word script or html is fine; <3\n"
    assert detect(data) == "text/plain"


def test_json_may_contain_markup_in_its_strings() -> None:
    data = json.dumps({"html": "<html><body><script>x</script></body></html>"}).encode()
    assert detect(data) == "application/json"
    assert detect(data, "page.txt") == "application/json"


def test_rtf_is_refused_even_when_named_doc() -> None:
    data = samples.fixture("note.rtf")
    assert rejection(data, "letter.doc") == "RTF documents are not allowed."
    assert rejection(data, "letter.txt") == "RTF documents are not allowed."


def test_empty_content_is_refused() -> None:
    assert rejection(b"", "empty.txt") == "The file is empty."


def test_whitespace_only_content_is_plain_text() -> None:
    assert detect(b" \n\t\n") == "text/plain"


class TestRdf:
    def test_rdf_without_xml_declaration(self) -> None:
        assert detect(f"{RDF_OPEN}</rdf:RDF>".encode()) == "application/rdf+xml"

    def test_rdf_with_a_different_prefix(self) -> None:
        data = f'<r:RDF xmlns:r="{samples.RDF_NAMESPACE}"/>'.encode()
        assert detect(data) == "application/rdf+xml"

    def test_rdf_larger_than_the_head(self) -> None:
        description = b'<rdf:Description rdf:about="urn:x"/>\n'
        data = (
            samples.rdf_bytes().replace(b"</rdf:RDF>\n", b"")
            + description * (3 * HEAD_BYTES // len(description))
            + b"</rdf:RDF>\n"
        )
        assert detect(data, "big.rdf") == "application/rdf+xml"

    @pytest.mark.parametrize(
        "data",
        [
            b"<RDF/>",
            b'<rdf:RDF xmlns:rdf="http://example.org/not-rdf#"/>',
            b'<rdf:Description xmlns:rdf="http://www.w3.org/1999/02/22-rdf-syntax-ns#"/>',
        ],
        ids=["no-namespace", "wrong-namespace", "wrong-root"],
    )
    def test_root_must_be_rdf_in_the_rdf_namespace(self, data: bytes) -> None:
        reason = rejection(data, "graph.rdf")
        assert reason == "HTML and XML documents other than RDF/XML are not allowed."

    def test_any_doctype_is_refused(self) -> None:
        data = f'<?xml version="1.0"?><!DOCTYPE rdf:RDF>{RDF_OPEN}</rdf:RDF>'.encode()
        reason = rejection(data, "graph.rdf")
        assert reason == "XML documents with a DOCTYPE declaration are not allowed."

    def test_external_entities_are_refused(self) -> None:
        data = (
            '<?xml version="1.0"?><!DOCTYPE r [<!ENTITY x SYSTEM "file:///etc/passwd">]>'
            f"{RDF_OPEN}&x;</rdf:RDF>"
        ).encode()
        assert "DOCTYPE" in rejection(data, "graph.rdf")

    @pytest.mark.parametrize(
        "inner",
        [
            '<h:script xmlns:h="http://www.w3.org/1999/xhtml">alert(1)</h:script>',
            '<rdf:value rdf:parseType="Literal"><p xmlns="http://www.w3.org/1999/xhtml"/>'
            "</rdf:value>",
            '<s:svg xmlns:s="http://www.w3.org/2000/svg"/>',
            '<rdf:value rdf:parseType="Literal"><p xmlns="http://www.w3.org/1999/&#x78;html"/>'
            "</rdf:value>",
            '<rdf:value rdf:parseType="Literal"><p xmlns="&#104;ttp://www.w3.org/1999/xhtm&#108;"/>'
            "</rdf:value>",
            '<rdf:value rdf:parseType="Literal"><g xmlns="http://www.w3.org/2000/&#x73;vg"/>'
            "</rdf:value>",
        ],
        ids=["xhtml-script", "xhtml-literal", "svg", "hex-reference", "decimal", "svg-reference"],
    )
    def test_active_content_inside_rdf_is_refused(self, inner: str) -> None:
        data = f"{RDF_OPEN}{inner}</rdf:RDF>".encode()
        assert "RDF/XML documents embedding" in rejection(data, "graph.rdf")

    def test_stylesheet_processing_instruction_is_refused(self) -> None:
        data = f'<?xml-stylesheet type="text/xsl" href="x.xsl"?>{RDF_OPEN}</rdf:RDF>'.encode()
        assert "RDF/XML documents embedding" in rejection(data, "graph.rdf")
