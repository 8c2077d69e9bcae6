"""Embedded OLE objects of an .xls that LibreOffice's .xlsx export drops, put back from the legacy file.

LibreOffice 25.2 loads an .xls's embedded objects (its ODF export holds every one) but its OOXML export of a
spreadsheet writes charts only: the sheet's drawing comes out empty. The .xls holds each object as an ``MBD<8 hex>``
storage at the root of the compound file, named by the ``lPosInCtlStm`` of the ftPictFmla of an OBJ record
([MS-XLS] FtPictFmla); the OBJ records of a sheet follow its OfficeArt shapes that carry client data one for
one, and each such shape holds the anchor (OfficeArtClientAnchorSheet) and the BStore index of its replacement image.
``mend`` writes each object as Excel does: the storage as ``xl/embeddings/oleObjectN.bin``, the image as
``xl/media/``, an ``<oleObject>`` with its anchor in the sheet and a VML shape (``legacyDrawing``) that shows it.
On a sheet where LibreOffice wrote a VML drawing of its own (its comments), the objects' shapes join it. An object
whose replacement image is of a type OOXML does not hold (a Mac PICT), or is missing, keeps its storage whole with a
blank image that Office draws anew when it is opened. LibreOffice writes a group whole, an object in it too: a sheet
with objects of LibreOffice's own gets only the others, and only when its own are the groups' members.
"""

import logging
import posixpath
import re
import struct
import zipfile
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TypeVar

import olefile

from docshift.engine import cfb, ooxml, pictures, sheet_drawing, sheet_shapes
from docshift.engine.embedding import (
    ERRORS,
    MAX_EDITED_PART,
    MAX_OBJECT,
    MAX_OBJECTS,
    OLE_CONTENT_TYPE,
    OLE_OBJECT,
    PartEdit,
    edited,
    free_name,
    prog_id_of,
)
from docshift.engine.inventory import xls
from docshift.engine.inventory.common import MSGRAPH_CLSIDS, Budget, Unreadable, stream
from docshift.engine.inventory.package import NS_R, NS_S, SEP, Package, relationships_part

log = logging.getLogger("docshift.engine")

OT_PICTURE, FT_CMO, FT_PICT_FMLA, FT_END = 0x08, 0x15, 0x09, 0x00
REL = "http://schemas.openxmlformats.org/officeDocument/2006/relationships/"
XDR = "http://schemas.openxmlformats.org/drawingml/2006/spreadsheetDrawing"
VML_CONTENT_TYPE = "application/vnd.openxmlformats-officedocument.vmlDrawing"
CT_NS = "http://schemas.openxmlformats.org/package/2006/content-types"
# what comes after <legacyDrawing> and <oleObjects> in CT_Worksheet's sequence: each goes in before the first
AFTER_LEGACY = re.compile(rb"<(?:legacyDrawingHF|drawingHF|picture|oleObjects|controls|webPublishItems|tableParts|"
                          rb"extLst)[\s/>]|</worksheet>")
LEGACY = re.compile(rb'<legacyDrawing\b[^>]*\bid="([^"]*)"')  # a sheet's VML drawing, and its relationship
AFTER_OBJECTS = re.compile(rb"<(?:controls|webPublishItems|tableParts|extLst)[\s/>]|</worksheet>")


T = TypeVar("T")


@dataclass
class Placed:
    """One embedded object of a sheet of the .xls: its storage, cell anchor (colL, dxL, rwT, dyT, colR, dxR, rwB, dyB:
    offsets in 1/1024 of a column, 1/256 of a row) and replacement image (None: none OOXML holds)."""
    storage: str
    anchor: tuple[int, ...]
    image: pictures.Picture | None


def mend(result: Path, source: Path, kind: str) -> int:
    """Put each embedded object of the .xls ``source`` that LibreOffice's export ``result`` lacks into its sheet,
    as Excel writes one: its storage as a part of its own, its ProgID, replacement image and anchor. Returns how
    many went in (0: the file is untouched). A part it cannot read or an object it cannot place leaves the file as
    LibreOffice wrote it. Never raises for what the files hold."""
    if kind != "xls" or not olefile.isOleFile(str(source)):
        return 0  # SpreadsheetML, HTML or BIFF2-4 under the name: no storage holds an object
    try:
        return _mend(result, source)
    except ERRORS as error:
        log.warning("embedded objects of %s stay as LibreOffice wrote them: %r", source, error)
        return 0


def _mend(result: Path, source: Path) -> int:
    with cfb.CompoundFile(source) as ole:
        # an MS Graph chart LibreOffice writes as a chart of its own: the storage too would draw it twice
        storages = {entry.name.upper(): entry.name for entry in ole.root.kids
                    if entry.entry_type == olefile.STGTY_STORAGE and entry.name.upper().startswith("MBD")
                    and (entry.clsid or "").upper() not in MSGRAPH_CLSIDS}
        if not storages:
            return 0
        sheets = _source_objects(ole, storages)
        if not any(placed for placed, _ in sheets.values()):
            return 0
        with zipfile.ZipFile(result) as zf:
            package = Package(zf)
            lower = {name.lower() for name in package.names}
            edits: dict[str, bytes] = {}
            added: dict[str, tuple[bytes, str]] = {}  # part: (bytes, content type)
            budget = [MAX_OBJECTS]
            for index, name, part in worksheets(package):
                placed, grouped = sheets.get(name, ([], 0))
                if placed:
                    _sheet(ole, package, part, index, placed, grouped, storages, lower, budget, edits, added)
            if not added:
                return 0
            write(zf, package, result, edits, added)
    return sum(1 for _, kind in added.values() if kind == OLE_CONTENT_TYPE)


COLUMN_NUMBERS = {letters.decode(): number for number, letters in enumerate(xls.COLUMNS)}  # "A": 0 ...
CELL = re.compile(r"\$?([A-Z]{1,3})\$?([0-9]{1,7})")  # an A1 reference, absolute or not
SHEETS_END = re.compile(rb"</(?:[A-Za-z_][\w.-]*:)?sheets>")  # the end of a workbook's list of sheets


def cell_place(reference: str) -> tuple[int, int] | None:
    """(row, column), 0-based, of the A1 reference ``reference`` ("B2", "$B$2"); None where it is none."""
    match = CELL.fullmatch(reference)
    if match is None or match.group(1) not in COLUMN_NUMBERS:
        return None
    return int(match.group(2)) - 1, COLUMN_NUMBERS[match.group(1)]


def cell_name(row: int, column: int) -> str:
    """The A1 name of the cell at ``row`` and ``column`` (0-based), within a sheet of Excel 2007's size."""
    return f"{xls.COLUMNS[min(column, len(xls.COLUMNS) - 1)].decode()}{min(row, 1_048_575) + 1}"


def sqref(ranges: Sequence[tuple[int, int, int, int]]) -> str:
    """The A1 references of ``ranges`` (first and last row, first and last column, 0-based), one for a cell's,
    separated by spaces."""
    return " ".join(cell_name(first, left) if (first, left) == (last, right) else
                    f"{cell_name(first, left)}:{cell_name(last, right)}" for first, last, left, right in ranges)


def worksheets(package: Package) -> list[tuple[int, str, str]]:
    """(its place among the sheets, from 1; its name; its part) of each sheet of the workbook ``package`` that has
    its part."""
    main = "xl/workbook.xml"
    names: list[tuple[str, str]] = []
    reader = ooxml.parser(main, Unreadable, lambda tag, attrs: names.append((
        ooxml.xstring(attrs.get("name", "")), attrs.get(f"{NS_R}{SEP}id", ""))) if tag == f"{NS_S}{SEP}sheet" else None)
    data = b"".join(package.chunks(main))
    listed = SHEETS_END.search(data)  # what follows the list (thousands of defined names in some) is not read
    ooxml.feed(reader, (data[:listed.end()],) if listed else (data,), main, Unreadable, final=listed is None)
    targets = package.relationships(main, required=True)
    found = [(index, name, targets.get(rid, ("", None))[1]) for index, (name, rid) in enumerate(names, 1)]
    return [(index, name, part) for index, name, part in found if part and part in package.names]


def edit_sheets(result: Path, wanted: Mapping[str, T], edit: Callable[[T], PartEdit], failure: str) -> int:
    """Each sheet of the workbook ``result`` that ``wanted`` names ({sheet name: what it gets}) given the part edit
    ``edit(what it gets)``; how many sheets changed (``embedding.edited``: ``failure`` logged where one does not
    read)."""
    return edited(result, lambda package: [(part, edit(wanted[name])) for _, name, part in worksheets(package)
                                           if name in wanted], failure)


def into_sheets(result: Path, sheets: Mapping[str, list[T]],
                write_sheet: Callable[[Package, str, int, list[T], set[str], dict[str, bytes],
                                       dict[str, tuple[bytes, str]]], int]) -> int:
    """Write each sheet's items of ``sheets`` ({sheet name: items}) into that sheet of the package ``result`` with
    ``write_sheet(package, part, index, items, lower, edits, added)``, which answers how many went in; the package
    is written again once, where any did. Returns how many went in."""
    with zipfile.ZipFile(result) as zf:
        package = Package(zf)
        lower = {name.lower() for name in package.names}
        edits: dict[str, bytes] = {}
        added: dict[str, tuple[bytes, str]] = {}
        written = sum(write_sheet(package, part, index, sheets[name], lower, edits, added)
                      for index, name, part in worksheets(package) if sheets.get(name))
        if written:
            write(zf, package, result, edits, added)
    return written


def write(zf: zipfile.ZipFile, package: Package, result: Path, edits: dict[str, bytes],
          added: dict[str, tuple[bytes, str]]) -> None:
    """The package ``result`` (open as ``zf``) written again with ``edits`` and the ``added`` parts (bytes, content
    type), each content type declared."""
    types = ooxml.read(zf, package.names["[Content_Types].xml"], MAX_EDITED_PART)
    edits["[Content_Types].xml"] = with_overrides(ooxml.checked(types, "[Content_Types].xml"), added)
    ooxml.rewrite(zf, result, edits, {name: data for name, (data, _) in added.items()})


def _source_objects(ole: olefile.OleFileIO, storages: dict[str, str]) -> dict[str, tuple[list[Placed], int]]:
    """{sheet name, cut as the result's: ([its embedded objects whose storage and anchor are found], how many
    more are members of a group, which LibreOffice writes whole)}."""
    book, budget = records_of(ole)
    if book is None:
        return {}
    blips = sheet_shapes.blips_of(book.group, budget)
    found: dict[str, tuple[list[Placed], int]] = {}
    for _, sheet, pairs in sheet_shapes.paired(book, budget):
        placed, grouped = [], 0
        for shape, record in pairs:
            storage = _storage_name(record)
            if storage is None or storage.upper() not in storages:
                continue
            if shape.member:
                grouped += 1
            elif shape.anchor is not None:
                placed.append(Placed(storages[storage.upper()], shape.anchor, blips.get(shape.pib)))
        found[sheet] = (placed, grouped)
    return found


def records_of(ole: olefile.OleFileIO) -> tuple[xls._Workbook | None, Budget]:
    """What one pass over the .xls's BIFF records finds (None for an encrypted workbook), and the budget it spent."""
    data = stream(ole, "Workbook" if ole.exists("Workbook") else "Book")
    if data is None:
        raise Unreadable("no Workbook stream")
    budget = Budget()
    book = xls._biff(data, budget)
    return (None if book.encrypted else book), budget


def _storage_name(record: bytes) -> str | None:
    """The MBD storage an OBJ record's picture names ("MBD" and its ftPictFmla's lPosInCtlStm in hex), or None."""
    pos, picture = 0, False
    while pos + 4 <= len(record):
        ft, cb = struct.unpack_from("<HH", record, pos)
        if ft == FT_CMO and cb >= 2:
            picture = struct.unpack_from("<H", record, pos + 4)[0] == OT_PICTURE
        elif ft == FT_PICT_FMLA and picture and cb >= 6:
            (formula,) = struct.unpack_from("<H", record, pos + 4)
            if pos + 6 + formula + 4 <= len(record):
                return f"MBD{struct.unpack_from('<I', record, pos + 6 + formula)[0]:08X}"
        elif ft == FT_END:
            break
        pos += 4 + cb
    return None


def _sheet(ole: olefile.OleFileIO, package: Package, part: str, index: int, placed: list[Placed], grouped: int,
           storages: dict[str, str], lower: set[str], budget: list[int], edits: dict[str, bytes],
           added: dict[str, tuple[bytes, str]]) -> bool:
    """The objects ``placed`` into sheet ``part`` (the ``index``th), ``grouped`` more being in groups: its XML,
    relationships and VML in ``edits``, the new parts in ``added``. False, and nothing changed, when the sheet has
    objects already or a VML drawing the objects' shapes cannot join."""
    data = ooxml.checked(ooxml.read(package.zip, package.names[part], MAX_EDITED_PART), part)
    if b"<oleObjects" in data:
        return False
    # LibreOffice writes a group whole, its objects too, into the sheet's drawing: those are not written again
    written = sum(1 for drawing in drawings_of(package, part) for _, target in package.relationships(drawing).values()
                  if target and target.startswith("xl/embeddings/"))
    if written and written != grouped:
        return False  # objects of LibreOffice's own beside the groups': which is which cannot be told
    vml_part, vml = None, None  # the sheet's own VML drawing: LibreOffice's, for its comments
    legacy = LEGACY.search(data)
    if legacy is not None:
        vml_part = package.relationships(part).get(legacy.group(1).decode(), ("", None))[1]
        if vml_part is None or vml_part not in package.names:
            return False
        vml = ooxml.checked(ooxml.read(package.zip, package.names[vml_part], MAX_EDITED_PART), vml_part)
    ids = sheet_drawing.shape_ids(vml, index, len(placed))
    if ids is None:
        return False
    rels_part, rels = rels_of(package, part)
    vml_part = vml_part or free_name(lower, "xl/drawings/vmlDrawing{}.vml")
    vml_rels_part, vml_rels = rels_of(package, vml_part)
    rid, vml_rid = relationship_ids(rels), relationship_ids(vml_rels)
    column, row = sheet_drawing.geometry(data)
    new_rels: list[tuple[str, str, str]] = []  # (Id, type, target relative to the sheet)
    vml_new_rels: list[tuple[str, str, str]] = []
    parts: dict[str, tuple[bytes, str]] = {}
    objects, shapes = [], []
    for spid, item in zip(ids, placed):
        storage = cfb.read_storage(ole, storages[item.storage.upper()], min(MAX_OBJECT, budget[0]))
        blob = cfb.write(storage)
        budget[0] -= len(blob)
        if budget[0] < 0:
            break
        prog_id = prog_id_of(blob)
        image = item.image or pictures.blank_png()
        ole_part = free_name(lower, "xl/embeddings/oleObject{}.bin")
        image_part = free_name(lower, "xl/media/image{}." + image.extension)
        parts[ole_part] = (blob, OLE_CONTENT_TYPE)
        parts[image_part] = (image.data, image.content_type)
        ole_rid, image_rid, shape_rid = rid(), rid(), vml_rid()
        new_rels += [(ole_rid, OLE_OBJECT, "../embeddings/" + posixpath.basename(ole_part)),
                     (image_rid, REL + "image", "../media/" + posixpath.basename(image_part))]
        vml_new_rels.append((shape_rid, REL + "image", "../media/" + posixpath.basename(image_part)))
        corners = sheet_drawing.cells(item.anchor, column, row)
        prog = f' progId="{escape(prog_id)}"' if prog_id else ""
        cell_anchor = "".join(f"<{end}><xdr:col>{col}</xdr:col><xdr:colOff>{col_off}</xdr:colOff><xdr:row>{rw}"
                              f"</xdr:row><xdr:rowOff>{row_off}</xdr:rowOff></{end}>"
                              for end, (col, col_off, rw, row_off) in (("from", corners[0]), ("to", corners[1])))
        objects.append(
            f'<mc:AlternateContent xmlns:mc="http://schemas.openxmlformats.org/markup-compatibility/2006">'
            f'<mc:Choice xmlns:x14="http://schemas.microsoft.com/office/spreadsheetml/2009/9/main" Requires="x14">'
            f'<oleObject{prog} shapeId="{spid}" r:id="{ole_rid}"><objectPr defaultSize="0" r:id="{image_rid}">'
            f'<anchor xmlns:xdr="{XDR}" moveWithCells="1">{cell_anchor}</anchor></objectPr></oleObject></mc:Choice>'
            f'<mc:Fallback><oleObject{prog} shapeId="{spid}" r:id="{ole_rid}"/></mc:Fallback></mc:AlternateContent>')
        shapes.append(sheet_drawing.shape(spid, shape_rid, item.anchor, column, row))
    if not objects:
        return False
    if vml is None:
        parts[vml_part] = (sheet_drawing.drawing(index, shapes), VML_CONTENT_TYPE)
        legacy_rid = rid()
        new_rels.append((legacy_rid, REL + "vmlDrawing", "../drawings/" + posixpath.basename(vml_part)))
        data = insert_before(data, AFTER_LEGACY, f'<legacyDrawing xmlns:r="{NS_R}" r:id="{legacy_rid}"/>'.encode())
    else:
        merged = sheet_drawing.merged(vml, index, shapes)
        if merged is None:
            return False
        edits[vml_part] = merged
    add_relationships(package, vml_rels_part, vml_rels, vml_new_rels, edits, parts)
    edits[part] = insert_before(data, AFTER_OBJECTS,
                                f'<oleObjects xmlns:r="{NS_R}">{"".join(objects)}</oleObjects>'.encode())
    add_relationships(package, rels_part, rels, new_rels, edits, parts)
    added.update(parts)
    return True


def drawings_of(package: Package, part: str) -> list[str]:
    """The DrawingML drawing parts of sheet ``part``."""
    return [target for kind, target in package.relationships(part).values()
            if kind == REL + "drawing" and target and target in package.names]


def rels_of(package: Package, part: str) -> tuple[str, bytes]:
    """(the name of ``part``'s relationships part, its bytes or b"" when it has none)."""
    rels_part = relationships_part(part)
    if rels_part not in package.names:
        return rels_part, b""
    return rels_part, ooxml.checked(ooxml.read(package.zip, package.names[rels_part], MAX_EDITED_PART), rels_part)


def relationship_ids(rels: bytes) -> Callable[[], str]:
    """A source of relationship ids that ``rels`` does not use yet."""
    used = set(re.findall(rb'Id="([^"]*)"', rels))

    def fresh() -> str:
        number = len(used) + 1
        while f"rId{number}".encode() in used:
            number += 1
        used.add(f"rId{number}".encode())
        return f"rId{number}"
    return fresh


def add_relationships(package: Package, rels_part: str, rels: bytes, new: Sequence[tuple[str, ...]],
                       edits: dict[str, bytes], parts: dict[str, tuple[bytes, str]]) -> None:
    if rels_part in package.names:
        edits[rels_part] = _relationships(rels, new)
    else:
        parts[rels_part] = (_relationships(b"", new), "")


def escape(text: str) -> str:
    return text.replace("&", "&amp;").replace('"', "&quot;").replace("<", "&lt;")


def insert_before(data: bytes, before: re.Pattern[bytes], element: bytes) -> bytes:
    """``element`` put into the worksheet ``data`` right before what ``before`` finds after its cells."""
    start = max(data.find(b"</sheetData>"), data.find(b"<sheetData/>"), 0)
    match = before.search(data, start)
    if match is None:
        raise Unreadable("the worksheet does not end")
    return data[:match.start()] + element + data[match.start():]


def append_to(data: bytes, container: str, before: re.Pattern[bytes], elements: list[str]) -> bytes:
    """The worksheet ``data`` with ``elements`` at the end of its ``container`` (as LibreOffice's own controls or
    hyperlinks), or in a new one put in right before what ``before`` finds after its cells."""
    end = data.find(f"</{container}>".encode())
    if end >= 0:
        return data[:end] + "".join(elements).encode("utf-8") + data[end:]
    return insert_before(data, before, f"<{container}>{''.join(elements)}</{container}>".encode())


def _relationships(rels: bytes, new: Sequence[tuple[str, ...]]) -> bytes:
    """Relationships part ``rels`` (b"": a new one) with the ``new`` (Id, type, target[, target mode]) ones added."""
    entries = "".join(f'<Relationship Id="{rid}" Type="{kind}" Target="{target}"'
                      + "".join(f' TargetMode="{value}"' for value in mode) + "/>" for rid, kind, target, *mode in new)
    if not rels:
        return ('<?xml version="1.0" encoding="UTF-8" standalone="yes"?>\n<Relationships xmlns='
                f'"{ooxml.PACKAGE_RELATIONSHIPS}">{entries}</Relationships>').encode()
    end = rels.rfind(b"</Relationships>")
    if end < 0:
        raise Unreadable("relationships without their end")
    return rels[:end] + entries.encode("utf-8") + rels[end:]


def with_overrides(types: bytes, added: dict[str, tuple[bytes, str]]) -> bytes:
    """[Content_Types].xml with an Override for each added part that has a content type."""
    end = types.rfind(b"</Types>")
    if end < 0:
        raise Unreadable("[Content_Types].xml without its end")
    overrides = "".join(f'<Override PartName="/{name}" ContentType="{content_type}"/>'
                        for name, (_, content_type) in added.items() if content_type)
    return types[:end] + overrides.encode("utf-8") + types[end:]
