"""Container rules: ZIP (and the Office Open XML formats inside it) and OLE2 compound files.

Both formats keep their directory at offsets the file itself states, so every offset is read
through ``Sample.read_at``: a forged size or count can point anywhere, but it can never make
detection read, allocate or loop beyond the bytes of the sample.
"""

from __future__ import annotations

import struct
import uuid
import zlib
from dataclasses import dataclass

from .mime import DOC, DOCX, PPTX, XLSX, ZIP, UnsupportedFileType
from .sample import OutsideSample, Sample
from .xmlscan import scan_elements

# --- ZIP --------------------------------------------------------------------------------------

_LOCAL_SIGNATURE = b"PK\x03\x04"
_CENTRAL_SIGNATURE = b"PK\x01\x02"
_END_SIGNATURE = b"PK\x05\x06"
_ZIP64_LOCATOR_SIGNATURE = b"PK\x06\x07"
_ZIP64_END_SIGNATURE = b"PK\x06\x06"

_END = struct.Struct("<4s4H2IH")
_ZIP64_LOCATOR = struct.Struct("<4sIQI")
_ZIP64_END = struct.Struct("<4sQ2H2I4Q")
_CENTRAL = struct.Struct("<4s6H3I5H2I")
_LOCAL = struct.Struct("<4s5H3I2H")

_MAX_COMMENT = 0xFFFF
_ZIP64_EXTRA_ID = 0x0001
_FLAG_ENCRYPTED = 0x0001
_FLAG_DATA_DESCRIPTOR = 0x0008
_FLAG_UTF8 = 0x0800
_STORED, _DEFLATED = 0, 8

_MAX_LOCAL_HEADERS = 65_536
_RESYNC_ATTEMPTS = 8
_MAX_PART_READ = 1024 * 1024  # compressed bytes read, and bytes inflated, for one entry

_OOXML_MAIN_TYPES = {
    "application/vnd.openxmlformats-officedocument.wordprocessingml.document.main+xml": DOCX,
    "application/vnd.openxmlformats-officedocument.spreadsheetml.sheet.main+xml": XLSX,
    "application/vnd.openxmlformats-officedocument.presentationml.presentation.main+xml": PPTX,
}
_OOXML_MAIN_PARTS = {
    "word/document.xml": DOCX,
    "xl/workbook.xml": XLSX,
    "ppt/presentation.xml": PPTX,
}
_CONTENT_TYPES_PART = "[content_types].xml"


class _MalformedZip(Exception):
    """Bytes where a ZIP structure should be are not one."""


@dataclass(frozen=True, slots=True)
class ZipEntry:
    """What detection needs of one archive member."""

    name: str
    flags: int
    method: int
    compressed_size: int
    local_offset: int


@dataclass(slots=True)
class ZipListing:
    """Members keyed by lower-case name; ``complete`` when the whole directory was read."""

    entries: dict[str, ZipEntry]
    complete: bool

    def add(self, entries: list[ZipEntry]) -> None:
        for entry in entries:
            self.entries.setdefault(entry.name.lower(), entry)


def _zip_damaged(detail: str) -> UnsupportedFileType:
    return UnsupportedFileType(f"The ZIP archive is damaged ({detail}).")


def detect_zip(sample: Sample) -> str | None:
    """ZIP, or the more specific OOXML type; other ZIP-based formats are rejected."""
    if not sample.head.startswith((_LOCAL_SIGNATURE, _END_SIGNATURE)):
        return None
    listing = read_zip_listing(sample)
    _reject_other_zip_formats(sample, listing)
    if _CONTENT_TYPES_PART in listing.entries:
        return _classify_ooxml(sample, listing)
    return ZIP


def read_zip_listing(sample: Sample) -> ZipListing:
    """Member names from the central directory, as far as the sample holds it.

    Where the directory has a gap, its end in the tail and the local headers at the start of
    the head fill in.
    """
    cd_offset, cd_end = _locate_central_directory(sample)
    try:
        entries, pos = _walk_central_directory(sample, cd_offset, cd_end)
    except _MalformedZip:
        raise _zip_damaged("invalid central directory") from None
    listing = ZipListing(entries={}, complete=pos == cd_end)
    listing.add(entries)
    if not listing.complete:
        listing.add(_resync_central_directory(sample, max(pos, sample.tail_offset), cd_end))
        listing.add(_walk_local_headers(sample.head))
    return listing


def _locate_central_directory(sample: Sample) -> tuple[int, int]:
    """Offset and end of the central directory, from the (ZIP64) end records in the tail."""
    tail = sample.tail
    window = max(0, len(tail) - _END.size - _MAX_COMMENT)
    found = len(tail)
    while True:
        found = tail.rfind(_END_SIGNATURE, window, found)
        if found < 0:
            raise _zip_damaged("no end of central directory record")
        if found + _END.size <= len(tail):
            record = _END.unpack_from(tail, found)
            if found + _END.size + record[7] == len(tail):
                break
    end_offset = sample.tail_offset + found
    _sig, disk, cd_disk, _entries_here, _entries, cd_size, cd_offset, _comment = record
    cd_limit = end_offset
    try:
        locator = sample.read_at(end_offset - _ZIP64_LOCATOR.size, _ZIP64_LOCATOR.size)
    except (OutsideSample, ValueError):
        locator = b""
    if locator.startswith(_ZIP64_LOCATOR_SIGNATURE) and len(locator) == _ZIP64_LOCATOR.size:
        _sig, _disk, zip64_end_offset, _disks = _ZIP64_LOCATOR.unpack(locator)
        try:
            zip64_end = sample.read_at(zip64_end_offset, _ZIP64_END.size)
        except OutsideSample:
            raise _zip_damaged("the ZIP64 end record is out of reach") from None
        if len(zip64_end) < _ZIP64_END.size or not zip64_end.startswith(_ZIP64_END_SIGNATURE):
            raise _zip_damaged("invalid ZIP64 end record")
        fields = _ZIP64_END.unpack(zip64_end)
        disk, cd_disk, cd_size, cd_offset = fields[4], fields[5], fields[8], fields[9]
        cd_limit = zip64_end_offset
    if disk != 0 or cd_disk != 0:
        raise UnsupportedFileType("Multi-part (split) ZIP archives are not allowed.")
    if cd_offset + cd_size > cd_limit:
        raise _zip_damaged("the central directory lies outside the archive")
    return cd_offset, cd_offset + cd_size


def _walk_central_directory(sample: Sample, pos: int, end: int) -> tuple[list[ZipEntry], int]:
    """Parse central headers from ``pos``; returns them and where a sample gap stopped the walk."""
    entries: list[ZipEntry] = []
    while pos < end:
        try:
            fixed = sample.read_at(pos, _CENTRAL.size)
            if len(fixed) < _CENTRAL.size:
                raise _MalformedZip
            fields = _CENTRAL.unpack(fixed)
            if fields[0] != _CENTRAL_SIGNATURE:
                raise _MalformedZip
            flags, method = fields[3], fields[4]
            compressed, name_length, extra_length, comment_length = fields[8], *fields[10:13]
            local_offset = fields[16]
            variable = sample.read_at(pos + _CENTRAL.size, name_length + extra_length)
        except OutsideSample:
            break
        name = _decode_name(variable[:name_length], flags)
        compressed, local_offset = _apply_zip64_extra(
            variable[name_length:], fields[9], compressed, local_offset
        )
        entries.append(ZipEntry(name, flags, method, compressed, local_offset))
        pos += _CENTRAL.size + name_length + extra_length + comment_length
    if pos > end:
        raise _MalformedZip
    return entries, pos


def _resync_central_directory(sample: Sample, start: int, end: int) -> list[ZipEntry]:
    """Entries at the end of a directory whose beginning is not in the sample.

    A candidate header counts only if walking from it lands exactly on the directory's end.
    """
    base = sample.tail_offset
    search_from, search_to = start - base, end - base
    if search_from < 0 or search_from >= search_to:
        return []
    for _ in range(_RESYNC_ATTEMPTS):
        found = sample.tail.find(_CENTRAL_SIGNATURE, search_from, search_to)
        if found < 0:
            break
        try:
            entries, pos = _walk_central_directory(sample, base + found, end)
        except _MalformedZip:
            entries, pos = [], -1
        if pos == end:
            return entries
        search_from = found + 1
    return []


def _walk_local_headers(head: bytes) -> list[ZipEntry]:
    """Members in stored order from the start of the archive, until a size is unknown."""
    entries: list[ZipEntry] = []
    pos = 0
    while pos + _LOCAL.size <= len(head) and len(entries) < _MAX_LOCAL_HEADERS:
        fields = _LOCAL.unpack_from(head, pos)
        if fields[0] != _LOCAL_SIGNATURE:
            break
        flags, method, compressed = fields[2], fields[3], fields[7]
        name_length, extra_length = fields[9], fields[10]
        data_offset = pos + _LOCAL.size + name_length + extra_length
        if data_offset > len(head):
            break
        name = _decode_name(head[pos + _LOCAL.size : pos + _LOCAL.size + name_length], flags)
        extra = head[pos + _LOCAL.size + name_length : data_offset]
        compressed, _ = _apply_zip64_extra(extra, fields[8], compressed, 0)
        entries.append(ZipEntry(name, flags, method, compressed, pos))
        if flags & _FLAG_DATA_DESCRIPTOR and compressed == 0:
            break
        pos = data_offset + compressed
    return entries


def _decode_name(raw: bytes, flags: int) -> str:
    return raw.decode("utf-8" if flags & _FLAG_UTF8 else "cp437", errors="replace")


def _apply_zip64_extra(
    extra: bytes, uncompressed: int, compressed: int, local_offset: int
) -> tuple[int, int]:
    """Replace 0xFFFFFFFF sizes and offsets with their values from the ZIP64 extra field."""
    pos = 0
    while pos + 4 <= len(extra):
        header_id, size = struct.unpack_from("<HH", extra, pos)
        if header_id == _ZIP64_EXTRA_ID:
            values = extra[pos + 4 : pos + 4 + size]
            cursor = 0
            if uncompressed == 0xFFFFFFFF:
                cursor += 8
            if compressed == 0xFFFFFFFF and cursor + 8 <= len(values):
                (compressed,) = struct.unpack_from("<Q", values, cursor)
                cursor += 8
            if local_offset == 0xFFFFFFFF and cursor + 8 <= len(values):
                (local_offset,) = struct.unpack_from("<Q", values, cursor)
            break
        pos += 4 + size
    return compressed, local_offset


def read_zip_member(sample: Sample, entry: ZipEntry) -> tuple[bytes, bool] | None:
    """Up to 1 MiB of a member's content and whether that is all of it; None if unreadable."""
    if entry.flags & _FLAG_ENCRYPTED or entry.method not in (_STORED, _DEFLATED):
        return None
    try:
        local = sample.read_at(entry.local_offset, _LOCAL.size)
        if len(local) < _LOCAL.size or not local.startswith(_LOCAL_SIGNATURE):
            return None
        name_length, extra_length = _LOCAL.unpack(local)[9:11]
        data_offset = entry.local_offset + _LOCAL.size + name_length + extra_length
        wanted = min(entry.compressed_size, _MAX_PART_READ)
        raw = sample.read_at(data_offset, wanted)
    except OutsideSample:
        return None
    whole = wanted == entry.compressed_size == len(raw)
    if entry.method == _STORED:
        return raw, whole
    inflater = zlib.decompressobj(-zlib.MAX_WBITS)
    try:
        content = inflater.decompress(raw, _MAX_PART_READ)
    except zlib.error:
        return None
    return content, whole and inflater.eof


def _reject_other_zip_formats(sample: Sample, listing: ZipListing) -> None:
    """ZIP-based formats with their own meaning (e-books, ODF, Java, Android, iOS) are refused."""
    names = listing.entries
    if "mimetype" in names:
        member = read_zip_member(sample, names["mimetype"])
        declared = member[0][:200].decode("ascii", "replace") if member else ""
        if declared.startswith("application/epub+zip"):
            raise UnsupportedFileType("EPUB e-books are not allowed.")
        if declared.startswith("application/vnd.oasis.opendocument"):
            raise UnsupportedFileType("OpenDocument (ODF) files are not allowed.")
        raise UnsupportedFileType("ZIP-based document formats are not allowed.")
    if "meta-inf/container.xml" in names:
        raise UnsupportedFileType("EPUB e-books are not allowed.")
    if "androidmanifest.xml" in names or "classes.dex" in names:
        raise UnsupportedFileType("Android apps (APK) are not allowed.")
    if "meta-inf/manifest.mf" in names:
        raise UnsupportedFileType("Java archives (JAR) are not allowed.")
    if any(name.startswith("payload/") and ".app/" in name for name in names):
        raise UnsupportedFileType("iOS apps (IPA) are not allowed.")


def _classify_ooxml(sample: Sample, listing: ZipListing) -> str:
    """DOCX, XLSX or PPTX by content types (by part names if those cannot be read)."""
    names = listing.entries
    if any(name.endswith("vbaproject.bin") for name in names):
        raise UnsupportedFileType("Office documents with macros are not allowed.")
    content_types = _read_content_types(sample, names[_CONTENT_TYPES_PART])
    if content_types is None:
        kinds = {kind for part, kind in _OOXML_MAIN_PARTS.items() if part in names}
    else:
        if any(
            "macroenabled" in value or "vbaproject" in value for value in content_types.values()
        ):
            raise UnsupportedFileType("Office documents with macros are not allowed.")
        main_parts = {
            part: _OOXML_MAIN_TYPES[value]
            for part, value in content_types.items()
            if value in _OOXML_MAIN_TYPES and not part.startswith("*.")
        }
        if listing.complete and main_parts and not main_parts.keys() & names.keys():
            raise UnsupportedFileType("The Office document is damaged (its main part is missing).")
        kinds = set(main_parts.values())
    if len(kinds) > 1:
        raise UnsupportedFileType("The Office document is ambiguous (several main parts).")
    if not kinds:
        raise UnsupportedFileType(
            "Office Open XML files other than DOCX, XLSX and PPTX documents are not allowed."
        )
    return kinds.pop()


def _read_content_types(sample: Sample, entry: ZipEntry) -> dict[str, str] | None:
    """Part name (or ``*.ext`` default) to lower-case content type; None if not readable."""
    member = read_zip_member(sample, entry)
    if member is None:
        return None
    content, whole = member
    types: dict[str, str] = {}

    def on_element(_namespace: str | None, local: str, attributes: dict[str, str]) -> None:
        content_type = attributes.get("ContentType", "").strip().lower()
        if local == "Override" and "PartName" in attributes:
            types[attributes["PartName"].lstrip("/").lower()] = content_type
        elif local == "Default" and "Extension" in attributes:
            types["*." + attributes["Extension"].lower()] = content_type

    if not scan_elements(content, whole, on_element) and not types:
        return None
    return types


# --- OLE2 compound files ----------------------------------------------------------------------

OLE2_SIGNATURE = bytes.fromhex("d0cf11e0a1b11ae1")
_OLE_HEADER_SIZE = 512
_OLE_DIFAT_IN_HEADER = 109
_OLE_ENTRY_SIZE = 128
_OLE_MAX_REGULAR_SECTOR = 0xFFFFFFFA
_OLE_NO_STREAM = 0xFFFFFFFF
_OLE_STORAGE, _OLE_STREAM, _OLE_ROOT = 1, 2, 5
_OLE_MAX_CHAIN = 16_384
_OLE_MAX_ENTRIES = 16_384
_MSI_CLASS_IDS = frozenset(
    uuid.UUID(value).bytes_le
    for value in (
        "000c1084-0000-0000-c000-000000000046",  # installer package (.msi)
        "000c1086-0000-0000-c000-000000000046",  # patch (.msp)
        "000c1082-0000-0000-c000-000000000046",  # transform (.mst)
    )
)
_EXCEL_STREAMS = ("workbook", "book")
_POWERPOINT_STREAM = "powerpoint document"


class _DamagedCompoundFile(Exception):
    """The compound file's header, allocation table or directory is inconsistent."""


@dataclass(frozen=True, slots=True)
class _DirectoryEntry:
    name: str
    kind: int
    left: int
    right: int
    child: int
    class_id: bytes


class _CompoundFile:
    """Just enough of [MS-CFB] to list the root storage, reading each sector through the sample."""

    def __init__(self, sample: Sample) -> None:
        header = sample.head[:_OLE_HEADER_SIZE]
        if len(header) < _OLE_HEADER_SIZE:
            raise _DamagedCompoundFile
        major, byte_order, sector_shift = struct.unpack_from("<3H", header, 0x1A)
        if byte_order != 0xFFFE or (major, sector_shift) not in ((3, 9), (4, 12)):
            raise _DamagedCompoundFile
        self._sample = sample
        self._sector_size = 1 << sector_shift
        (self._first_directory_sector,) = struct.unpack_from("<I", header, 0x30)
        self._first_difat_sector, self._difat_sector_count = struct.unpack_from("<2I", header, 0x44)
        self._difat = struct.unpack_from(f"<{_OLE_DIFAT_IN_HEADER}I", header, 0x4C)
        self._directory_chain = [self._regular(self._first_directory_sector)]
        self._chain_seen = set(self._directory_chain)

    @staticmethod
    def _regular(sector: int) -> int:
        if sector >= _OLE_MAX_REGULAR_SECTOR:
            raise _DamagedCompoundFile
        return sector

    def _sector_offset(self, sector: int) -> int:
        return (sector + 1) * self._sector_size

    def _u32(self, offset: int) -> int:
        data = self._sample.read_at(offset, 4)
        if len(data) < 4:
            raise _DamagedCompoundFile
        return int.from_bytes(data, "little")

    def _fat_sector(self, index: int) -> int:
        """The sector holding the index-th block of the allocation table (via the DIFAT)."""
        if index < _OLE_DIFAT_IN_HEADER:
            return self._regular(self._difat[index])
        per_sector = self._sector_size // 4 - 1
        hops, slot = divmod(index - _OLE_DIFAT_IN_HEADER, per_sector)
        if hops >= min(self._difat_sector_count, _OLE_MAX_CHAIN):
            raise _DamagedCompoundFile
        sector = self._regular(self._first_difat_sector)
        for _ in range(hops):
            sector = self._regular(self._u32(self._sector_offset(sector) + per_sector * 4))
        return self._regular(self._u32(self._sector_offset(sector) + slot * 4))

    def _next_sector(self, sector: int) -> int:
        per_sector = self._sector_size // 4
        fat_sector = self._fat_sector(sector // per_sector)
        return self._u32(self._sector_offset(fat_sector) + (sector % per_sector) * 4)

    def entry(self, stream_id: int) -> _DirectoryEntry:
        per_sector = self._sector_size // _OLE_ENTRY_SIZE
        index, slot = divmod(stream_id, per_sector)
        chain = self._directory_chain
        while len(chain) <= index:
            following = self._regular(self._next_sector(chain[-1]))
            if following in self._chain_seen or len(chain) >= _OLE_MAX_CHAIN:
                raise _DamagedCompoundFile
            chain.append(following)
            self._chain_seen.add(following)
        raw = self._sample.read_at(
            self._sector_offset(chain[index]) + slot * _OLE_ENTRY_SIZE, _OLE_ENTRY_SIZE
        )
        if len(raw) < _OLE_ENTRY_SIZE:
            raise _DamagedCompoundFile
        (name_length,) = struct.unpack_from("<H", raw, 0x40)
        if name_length > 64 or name_length % 2:
            raise _DamagedCompoundFile
        name = raw[: max(name_length - 2, 0)].decode("utf-16-le", errors="replace")
        left, right, child = struct.unpack_from("<3I", raw, 0x44)
        return _DirectoryEntry(name, raw[0x42], left, right, child, raw[0x50:0x60])

    def root_listing(self) -> tuple[_DirectoryEntry, dict[str, int]]:
        """The root entry and its children's lower-case names mapped to their entry kind."""
        root = self.entry(0)
        if root.kind != _OLE_ROOT:
            raise _DamagedCompoundFile
        children: dict[str, int] = {}
        pending = [root.child]
        visited: set[int] = set()
        while pending:
            stream_id = pending.pop()
            if stream_id == _OLE_NO_STREAM:
                continue
            if stream_id in visited or len(visited) >= _OLE_MAX_ENTRIES:
                raise _DamagedCompoundFile
            visited.add(stream_id)
            child = self.entry(stream_id)
            if child.kind not in (_OLE_STORAGE, _OLE_STREAM):
                raise _DamagedCompoundFile
            children[child.name.lower()] = child.kind
            pending.extend((child.left, child.right))
        return root, children


def detect_ole2(sample: Sample) -> str | None:
    """A compound file is a Word document only if its root holds a WordDocument stream."""
    if not sample.head.startswith(OLE2_SIGNATURE):
        return None
    try:
        root, children = _CompoundFile(sample).root_listing()
    except _DamagedCompoundFile:
        raise UnsupportedFileType("The legacy Office (OLE2) file is damaged.") from None
    except OutsideSample:
        raise UnsupportedFileType(
            "The legacy Office (OLE2) file's directory lies beyond the part of the file examined."
        ) from None
    is_excel = any(name in children for name in _EXCEL_STREAMS)
    is_powerpoint = _POWERPOINT_STREAM in children
    if children.get("worddocument") == _OLE_STREAM:
        if is_excel or is_powerpoint:
            raise UnsupportedFileType("The legacy Office file is ambiguous (several documents).")
        return DOC
    if is_excel:
        raise UnsupportedFileType("Excel 97-2003 workbooks (XLS) are not allowed.")
    if is_powerpoint:
        raise UnsupportedFileType("PowerPoint 97-2003 presentations (PPT) are not allowed.")
    if root.class_id in _MSI_CLASS_IDS:
        raise UnsupportedFileType("Windows Installer packages (MSI) are not allowed.")
    if "encryptedpackage" in children:
        raise UnsupportedFileType("Encrypted Office documents are not allowed.")
    raise UnsupportedFileType("OLE2 compound files other than Word documents are not allowed.")
