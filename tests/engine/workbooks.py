"""What the workbook tests build their files with: an .xlsx's parts given a DrawingML drawing on its first sheet,
and an .xls written again with its Workbook stream edited (records an export of LibreOffice does not write); and
the conversion whose report they check."""

import struct
import uuid
import zipfile
from collections.abc import Callable
from pathlib import Path

import olefile

from docshift.engine import cfb, convert

REL = "http://schemas.openxmlformats.org/officeDocument/2006/relationships"
SUMMARY_FORMAT = uuid.UUID("F29F85E0-4FF9-1068-AB91-08002B27B3D9").bytes_le  # FMTID_SummaryInformation


def parts_of(path: Path) -> dict[str, bytes]:
    """{part name: bytes} of the package at ``path``."""
    with zipfile.ZipFile(path) as package:
        return {name: package.read(name) for name in package.namelist()}


def with_drawing(parts: dict[str, bytes], drawing: str, out: Path, name: str = "drawing1.xml") -> Path:
    """The package ``parts`` (of a workbook whose first sheet has no relationships yet) written to ``out``, its first
    sheet given the DrawingML ``drawing`` as the part ``xl/drawings/<name>``."""
    assert b"<drawing" not in parts["xl/worksheets/sheet1.xml"] and "xl/worksheets/_rels/sheet1.xml.rels" not in parts
    parts = dict(parts)
    parts[f"xl/drawings/{name}"] = drawing.encode()
    parts["xl/worksheets/_rels/sheet1.xml.rels"] = (
        '<Relationships xmlns="http://schemas.openxmlformats.org/package/2006/relationships"><Relationship '
        f'Id="rId9" Type="{REL}/drawing" Target="../drawings/{name}"/></Relationships>').encode()
    parts["xl/worksheets/sheet1.xml"] = parts["xl/worksheets/sheet1.xml"].replace(
        b"</worksheet>", f'<drawing xmlns:r="{REL}" r:id="rId9"/></worksheet>'.encode())
    parts["[Content_Types].xml"] = parts["[Content_Types].xml"].replace(
        b"</Types>", f'<Override PartName="/xl/drawings/{name}" '
                     'ContentType="application/vnd.openxmlformats-officedocument.drawing+xml"/></Types>'.encode())
    with zipfile.ZipFile(out, "w") as package:
        for part, data in parts.items():
            package.writestr(part, data)
    return out


def with_workbook_stream(source: Path, edit: Callable[[bytes], bytes], out: Path) -> Path:
    """The .xls ``source`` written to ``out`` whole (``cfb.write``), its Workbook stream made ``edit(stream)``."""
    with olefile.OleFileIO(str(source)) as ole:
        root = cfb.read_storage(ole, "", 64 << 20)
    for entry in root.children:
        if entry.name == "Workbook" and entry.data is not None:
            entry.data = edit(entry.data)
    out.write_bytes(cfb.write(root))
    return out


def records(stream: bytes) -> list[tuple[int, int, int]]:
    """(where it starts, its type, its length) of each BIFF record of a Workbook ``stream``, in order."""
    found, pos = [], 0
    while pos + 4 <= len(stream):
        rec_type, length = struct.unpack_from("<HH", stream, pos)
        found.append((pos, rec_type, length))
        pos += 4 + length
    return found


def rewritten(stream: bytes, edit: Callable[[int, bytes, int], bytes | None]) -> bytes:
    """The Workbook ``stream`` with each record for which ``edit(its type, its body, how many records of its type
    came before it)`` answers bytes written as those bytes (whole records, none or several), each BOUNDSHEET's
    offset of its sheet moved by what the records before the sheet grew or shrank."""
    out, moved, seen = [], [], {}
    for pos, rec_type, length in records(stream):
        body = stream[pos + 4:pos + 4 + length]
        made = edit(rec_type, body, seen.get(rec_type, 0))
        seen[rec_type] = seen.get(rec_type, 0) + 1
        written = bytearray(stream[pos:pos + 4 + length] if made is None else made)
        out.append(written)
        moved.append((pos, len(written) - 4 - length))
    for written in out:
        if written[:2] == b"\x85\x00" and len(written) >= 8:  # BOUNDSHEET: lbPlyPos, where its sheet's BOF is
            offset = struct.unpack_from("<I", written, 4)[0]
            struct.pack_into("<I", written, 4, offset + sum(size for at, size in moved if at < offset))
    return b"".join(out)


def xfs_of_cells(stream: bytes) -> dict[tuple[int, int], int]:
    """{(row, column): its XF} of each cell of a Workbook ``stream`` held by a NUMBER, RK, LABELSST or BLANK record
    (the first sheet's where others have the same place)."""
    found: dict[tuple[int, int], int] = {}

    def look(rec_type: int, body: bytes, _: int) -> None:
        if rec_type in (0x0203, 0x027E, 0x00FD, 0x0201) and len(body) >= 6:
            row, column, xf = struct.unpack_from("<HHH", body)
            found.setdefault((row, column), xf)

    rewritten(stream, look)
    return found


def with_xfs_edited(stream: bytes, edits: dict[int, Callable[[bytearray], None]]) -> bytes:
    """The Workbook ``stream`` with each XF record ``edits`` names (by its index) changed in place by its edit."""
    def edit(rec_type: int, body: bytes, index: int) -> bytes | None:
        if rec_type != 0x00E0 or index not in edits:
            return None
        xf = bytearray(body)
        edits[index](xf)
        return record(rec_type, bytes(xf))

    return rewritten(stream, edit)


def saved_as_xls(book, out: Path, stem: str) -> Path:
    """The openpyxl workbook ``book`` saved as ``out / stem``.xlsx, then by LibreOffice as an .xls beside it."""
    from conftest import _soffice_save as soffice

    book.save(out / f"{stem}.xlsx")
    return soffice(out / f"{stem}.xlsx", "xls:MS Excel 97", out)


def record(rec_type: int, body: bytes) -> bytes:
    """A BIFF record of ``rec_type`` holding ``body``."""
    return struct.pack("<HH", rec_type, len(body)) + body


def two_sheets(out: Path, names: tuple[str, str], formula: str, edit: Callable[[bytes], bytes], name: str) -> Path:
    """An .xls of two sheets ``names`` saved by LibreOffice, each a row of 2 and ``formula`` (OpenFormula), then
    written to ``out / name`` with its Workbook stream made ``edit(stream)``."""
    from conftest import _soffice_save as soffice
    from conftest import flat_odf

    sheet = ('<table:table table:name="{}"><table:table-row><table:table-cell office:value-type="float" '
             f'office:value="2"/><table:table-cell table:formula="{formula}"/></table:table-row></table:table>')
    (out / "book.fods").write_text(flat_odf("spreadsheet", "".join(sheet.format(sheet_name) for sheet_name in names)))
    return with_workbook_stream(soffice(out / "book.fods", "xls", out), edit, out / name)


def sheets_of(result: Path, count: int = 2) -> list[str]:
    """The XML of the first ``count`` worksheet parts of the .xlsx ``result``, in order."""
    with zipfile.ZipFile(result) as package:
        return [package.read(f"xl/worksheets/sheet{n}.xml").decode() for n in range(1, count + 1)]


def converted_whole(office, source: Path, workdir: Path, what: str, count: int):
    """The worker's conversion of the .xls ``source``, whose report counts ``count`` of ``what`` on both sides and
    calls it complete."""
    converted = convert.convert(office, source, "xls", workdir, 60)
    assert converted.fidelity["counts"][what] == {"source": count, "result": count}
    assert converted.fidelity["complete"] is True, converted.fidelity["lost"]
    return converted


def excel_95(text: str, code_page: int | None = None, header: str | None = None, cells: bytes = b"") -> bytes:
    """An Excel 95 workbook stream, as programs other than Excel write one: no CODEPAGE record (or ``code_page``),
    one sheet "Sheet" whose A1 is ``text`` in Windows-1252, then the records ``cells`` (5 FONTs and 17 XFs: what
    LibreOffice's BIFF5 import wants), and its ``header``, if any."""
    def bof(kind: int) -> bytes:
        return record(0x0809, struct.pack("<HHHH", 0x0500, kind, 0x0DBB, 0x07CC))

    font = record(0x0031, struct.pack("<HHHHHBBBB", 200, 0, 0x7FFF, 400, 0, 0, 0, 0, 0) + b"\x05Arial")
    xfs = b"".join(record(0x00E0, struct.pack("<HHHBBII", 0, 0, 0xFFF5 if n < 16 else 1, 0x20, 0, 0, 0))
                   for n in range(17))
    encoded = text.encode("cp1252")
    sheet = bof(0x0010) + record(0x0200, struct.pack("<HHHHH", 0, 1, 0, 8, 0))
    sheet += record(0x0204, struct.pack("<HHHH", 0, 0, 16, len(encoded)) + encoded) + cells
    if header is not None:
        sheet += record(0x0014, bytes([len(header)]) + header.encode("cp1252"))
    sheet += record(0x000A, b"")
    globals_ = bof(0x0005) + (record(0x0042, struct.pack("<H", code_page)) if code_page else b"") + font * 5 + xfs
    sheet_at = len(globals_) + 4 + 7 + len(b"Sheet") + 4  # after the BOUNDSHEET and the EOF
    return globals_ + record(0x0085, struct.pack("<IBBB", sheet_at, 0, 0, 5) + b"Sheet") + record(0x000A, b"") + sheet


def excel_95_file(path: Path, stream: bytes, summary: dict[int, str] | None = None) -> Path:
    """``stream`` as the Book stream of a compound file at ``path``, as Excel 95 writes one, with a SummaryInformation
    stream of the ``summary`` properties ({property id: text}) where given."""
    children = [cfb.Entry("Book", data=stream)]
    if summary is not None:
        children.append(cfb.Entry("\x05SummaryInformation", data=summary_information(summary)))
    path.write_bytes(cfb.write(cfb.Entry("Root Entry", children=children)))
    return path


def summary_information(texts: dict[int, str], code_page: int = 1252) -> bytes:
    """A SummaryInformation property set ([MS-OLEPS] 2.21): its code page (VT_I2), then each of ``texts`` as an 8-bit
    string in that code page (VT_LPSTR), each value padded to four bytes."""
    values = [(0x0001, struct.pack("<HHh2x", 0x0002, 0, code_page))]
    for key, text in texts.items():
        encoded = text.encode(f"cp{code_page}") + b"\x00"
        values.append((key, struct.pack("<HHI", 0x001E, 0, len(encoded)) + encoded + bytes(-len(encoded) % 4)))
    table = 8 + 8 * len(values)
    offsets, at = [], table
    for key, value in values:
        offsets.append(struct.pack("<II", key, at))
        at += len(value)
    section = struct.pack("<II", at, len(values)) + b"".join(offsets) + b"".join(value for _, value in values)
    return struct.pack("<HHI16sI", 0xFFFE, 0, 0x00020005, bytes(16), 1) + SUMMARY_FORMAT + struct.pack("<I", 48) + \
        section
