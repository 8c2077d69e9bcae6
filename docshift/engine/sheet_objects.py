"""Embedded OLE objects of an .xls that LibreOffice's .xlsx export drops, put back from the legacy file.

LibreOffice 25.2 loads an .xls's embedded objects (its ODF export holds every one) but its OOXML export of a
spreadsheet writes charts only: the sheet's drawing comes out empty. The .xls holds each object as an ``MBD<8 hex>``
storage at the root of the compound file, named by the ``lPosInCtlStm`` of the ftPictFmla of an OBJ record
([MS-XLS] FtPictFmla); the OBJ records of a sheet follow its OfficeArt shapes that carry client data one for
one, and each such shape holds the anchor (OfficeArtClientAnchorSheet) and the BStore index of its replacement image.
``mend`` writes each object as Excel does: the storage as ``xl/embeddings/oleObjectN.bin``, the image as
``xl/media/``, an ``<oleObject>`` with its anchor in the sheet and a VML shape (``legacyDrawing``) that shows it.
Sheets where LibreOffice wrote a VML drawing of its own (comments) are left as they are.
"""

import logging
import posixpath
import re
import struct
import zipfile
import zlib
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import olefile

from docshift.engine import cfb, ooxml
from docshift.engine.inventory import officeart, xls
from docshift.engine.inventory.common import MSGRAPH_CLSIDS, Budget, Unreadable, stream
from docshift.engine.inventory.package import NS_R, NS_S, SEP, Package
from docshift.engine.objects import ERRORS, MAX_EDITED_PART, MAX_OBJECT, MAX_OBJECTS, OLE_CONTENT_TYPE, OLE_OBJECT
from docshift.engine.objects import _prog_id as prog_id_of

log = logging.getLogger("docshift.engine")

OT_PICTURE, FT_CMO, FT_PICT_FMLA, FT_END = 0x08, 0x15, 0x09, 0x00
OA_CLIENT_ANCHOR = 0xF010
# BLIP record types ([MS-ODRAW] 2.2.23) whose picture OOXML takes as it is: (extension, content type, metafile)
BLIPS = {0xF01A: ("emf", "image/x-emf", True), 0xF01D: ("jpeg", "image/jpeg", False),
         0xF01E: ("png", "image/png", False)}
REL = "http://schemas.openxmlformats.org/officeDocument/2006/relationships/"
XDR = "http://schemas.openxmlformats.org/drawingml/2006/spreadsheetDrawing"
VML_CONTENT_TYPE = "application/vnd.openxmlformats-officedocument.vmlDrawing"
CT_NS = "http://schemas.openxmlformats.org/package/2006/content-types"
EMU_PER_PIXEL, EMU_PER_POINT = 9525, 12700
MAX_DIGIT_WIDTH = 7  # pixels of a digit in Calibri 11, Excel's default: column widths count digits
# what comes after <legacyDrawing> and <oleObjects> in CT_Worksheet's sequence: each goes in before the first
AFTER_LEGACY = re.compile(rb"<(?:legacyDrawingHF|drawingHF|picture|oleObjects|controls|webPublishItems|tableParts|"
                          rb"extLst)[\s/>]|</worksheet>")
AFTER_OBJECTS = re.compile(rb"<(?:controls|webPublishItems|tableParts|extLst)[\s/>]|</worksheet>")


@dataclass
class Placed:
    """One embedded object of a sheet of the .xls: its storage, anchor (colL, dxL, rwT, dyT, colR, dxR, rwB, dyB:
    offsets in 1/1024 of a column, 1/256 of a row) and replacement image (BLIP record type, bytes)."""
    storage: str
    anchor: tuple[int, ...]
    image: tuple[int, bytes]


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
    with olefile.OleFileIO(str(source)) as ole:
        # an MS Graph chart LibreOffice writes as a chart of its own: the storage too would draw it twice
        storages = {entry.name.upper(): entry.name for entry in ole.root.kids
                    if entry.entry_type == olefile.STGTY_STORAGE and entry.name.upper().startswith("MBD")
                    and (entry.clsid or "").upper() not in MSGRAPH_CLSIDS}
        if not storages:
            return 0
        sheets = _source_objects(ole, storages)
        if not any(sheets.values()):
            return 0
        with zipfile.ZipFile(result) as zf:
            package = Package(zf)
            if package.matching(r"xl/embeddings/.+"):
                return 0  # LibreOffice wrote objects of its own: which is which cannot be told here
            lower = {name.lower() for name in package.names}
            edits: dict[str, bytes] = {}
            added: dict[str, tuple[bytes, str]] = {}  # part: (bytes, content type)
            main = "xl/workbook.xml"
            names: list[tuple[str, str]] = []
            package.parse(main, lambda tag, attrs: names.append((attrs.get("name", ""), attrs.get(f"{NS_R}{SEP}id",
                          ""))) if tag == f"{NS_S}{SEP}sheet" else None)
            targets = package.relationships(main, required=True)
            budget = [MAX_OBJECTS]
            for index, (name, rid) in enumerate(names, 1):
                placed = sheets.get(name)
                part = targets.get(rid, ("", None))[1]
                if not placed or not part or part not in package.names:
                    continue
                _sheet(ole, package, part, index, placed, storages, lower, budget, edits, added)
            if not added:
                return 0
            types = ooxml.read(zf, package.names["[Content_Types].xml"], MAX_EDITED_PART)
            edits["[Content_Types].xml"] = _content_types(ooxml.checked(types, "[Content_Types].xml"), added)
            ooxml.rewrite(zf, result, edits, {name: data for name, (data, _) in added.items()})
    return sum(1 for _, kind in added.values() if kind == OLE_CONTENT_TYPE)


def _source_objects(ole: olefile.OleFileIO, storages: dict[str, str]) -> dict[str, list[Placed]]:
    """{sheet name, cut as the result's: [its embedded objects whose storage, anchor and image are found]}."""
    name = "Workbook" if ole.exists("Workbook") else "Book"
    data = stream(ole, name)
    if data is None:
        raise Unreadable("no Workbook stream")
    budget = Budget()
    book = xls._biff(data, budget)
    if book.encrypted:
        return {}
    blips = _blips(book.group, budget)
    found: dict[str, list[Placed]] = {}
    for sheet, drawing, records in zip(book.drawing_sheets, book.drawings, book.objects):
        shapes = _shapes(drawing, budget)
        if len(shapes) != len(records):
            continue  # the shapes and their OBJ records do not pair up: which is which cannot be told
        placed = []
        for (anchor, pib), record in zip(shapes, records):
            storage = _storage_name(record)
            if storage is None or storage.upper() not in storages or anchor is None or pib not in blips:
                continue
            placed.append(Placed(storages[storage.upper()], anchor, blips[pib]))
        found[sheet[:31]] = placed
    return found


def _shapes(drawing: bytearray, budget: Budget) -> list[tuple[tuple[int, ...] | None, int]]:
    """(client anchor or None, BStore index of its picture or 0) of each shape with client data, in order."""
    found = []
    for rec_type, _, _, body, stop, _ in officeart.walk(drawing, 0, len(drawing), budget, skip=(officeart.OA_SP,)):
        if rec_type != officeart.OA_SP:
            continue
        anchor, pib, client = None, 0, False
        for child, instance, _, child_body, child_stop in officeart.children(drawing, body, stop, budget):
            if child == OA_CLIENT_ANCHOR and child_stop - child_body >= 18:
                anchor = struct.unpack_from("<8H", drawing, child_body + 2)
            elif child == officeart.OA_OPT:
                for index in range(min(instance, (child_stop - child_body) // 6)):
                    opid, value = struct.unpack_from("<HI", drawing, child_body + 6 * index)
                    if opid & 0x3FFF == officeart.PROP_PIB and opid & 0x4000:
                        pib = value
            elif child == officeart.OA_CLIENT_DATA:
                client = True
        if client:
            found.append((anchor, pib))
    return found


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


def _blips(group: bytearray, budget: Budget) -> dict[int, tuple[int, bytes]]:
    """{1-based BStore index: (BLIP record type, picture bytes)} of the pictures OOXML can hold as they are."""
    found: dict[int, tuple[int, bytes]] = {}
    index = 0
    for rec_type, _, _, body, stop, _ in officeart.walk(group, 0, len(group), budget, skip=(officeart.OA_FBSE,)):
        if rec_type != officeart.OA_FBSE:
            continue
        index += 1
        if stop - body < 44:
            continue
        name_length = group[body + 33]
        start = body + 36 + name_length
        if start + 8 > stop:
            continue
        _, instance, blip, blip_body, blip_stop = officeart.header(group, start)
        if blip not in BLIPS or blip_stop > stop:
            continue
        metafile = BLIPS[blip][2]
        uids = 2 if instance & 1 else 1  # odd instances carry a second uid
        pos = blip_body + 16 * uids
        if metafile:
            size = struct.unpack_from("<I", group, pos)[0]
            compressed = group[pos + 32] == 0
            raw = bytes(group[pos + 34:blip_stop])
            if size > MAX_OBJECT:
                continue
            picture = zlib.decompressobj().decompress(raw, size) if compressed else raw
        else:
            picture = bytes(group[pos + 1:blip_stop])  # after the tag byte
        if picture:
            found[index] = (blip, picture)
    return found


def _sheet(ole: olefile.OleFileIO, package: Package, part: str, index: int, placed: list[Placed],
           storages: dict[str, str], lower: set[str], budget: list[int], edits: dict[str, bytes],
           added: dict[str, tuple[bytes, str]]) -> bool:
    """The objects ``placed`` into sheet ``part`` (the ``index``th): its XML, relationships and VML in ``edits``,
    the new parts in ``added``. False, and nothing changed, when the sheet has a VML drawing already."""
    data = ooxml.checked(ooxml.read(package.zip, package.names[part], MAX_EDITED_PART), part)
    if b"<legacyDrawing" in data or b"<oleObjects" in data:
        return False
    folder, base = posixpath.split(part)
    rels_part = posixpath.join(folder, "_rels", base + ".rels")
    rels = (ooxml.checked(ooxml.read(package.zip, package.names[rels_part], MAX_EDITED_PART), rels_part)
            if rels_part in package.names else b"")
    used = set(re.findall(rb'Id="([^"]*)"', rels))
    column, row = _geometry(data)
    new_rels: list[tuple[str, str, str]] = []  # (Id, type, target relative to the sheet)
    vml_rels: list[tuple[str, str, str]] = []
    objects, shapes = [], []

    def rid() -> str:
        number = len(used) + 1
        while f"rId{number}".encode() in used:
            number += 1
        used.add(f"rId{number}".encode())
        return f"rId{number}"

    for number, item in enumerate(placed, 1):
        storage = cfb.read_storage(ole, storages[item.storage.upper()], min(MAX_OBJECT, budget[0]))
        blob = cfb.write(storage)
        budget[0] -= len(blob)
        if budget[0] < 0:
            break
        prog_id = prog_id_of(blob)
        ole_part = _name(lower, "xl/embeddings/oleObject{}.bin")
        extension, content_type, _ = BLIPS[item.image[0]]
        image_part = _name(lower, "xl/media/image{}." + extension)
        added[ole_part] = (blob, OLE_CONTENT_TYPE)
        added[image_part] = (item.image[1], content_type)
        ole_rid, image_rid = rid(), rid()
        new_rels += [(ole_rid, OLE_OBJECT, "../embeddings/" + posixpath.basename(ole_part)),
                     (image_rid, REL + "image", "../media/" + posixpath.basename(image_part))]
        vml_rid = f"rId{number}"
        vml_rels.append((vml_rid, REL + "image", "../media/" + posixpath.basename(image_part)))
        spid = 1024 * index + number
        cells = _cells(item.anchor, column, row)
        prog = f' progId="{_escape(prog_id)}"' if prog_id else ""
        anchor = "".join(f"<{end}><xdr:col>{col}</xdr:col><xdr:colOff>{col_off}</xdr:colOff><xdr:row>{row}</xdr:row>"
                         f"<xdr:rowOff>{row_off}</xdr:rowOff></{end}>"
                         for end, (col, col_off, row, row_off) in (("from", cells[0]), ("to", cells[1])))
        objects.append(
            f'<mc:AlternateContent xmlns:mc="http://schemas.openxmlformats.org/markup-compatibility/2006">'
            f'<mc:Choice xmlns:x14="http://schemas.microsoft.com/office/spreadsheetml/2009/9/main" Requires="x14">'
            f'<oleObject{prog} shapeId="{spid}" r:id="{ole_rid}"><objectPr defaultSize="0" r:id="{image_rid}">'
            f'<anchor xmlns:xdr="{XDR}" moveWithCells="1">{anchor}</anchor></objectPr></oleObject></mc:Choice>'
            f'<mc:Fallback><oleObject{prog} shapeId="{spid}" r:id="{ole_rid}"/></mc:Fallback></mc:AlternateContent>')
        shapes.append(_vml_shape(spid, vml_rid, item.anchor, column, row))
    if not objects:
        return False
    vml_part = _name(lower, "xl/drawings/vmlDrawing{}.vml")
    vml_rid = rid()
    new_rels.append((vml_rid, REL + "vmlDrawing", "../drawings/" + posixpath.basename(vml_part)))
    added[vml_part] = (_vml(index, shapes), VML_CONTENT_TYPE)
    added[posixpath.join("xl/drawings/_rels", posixpath.basename(vml_part) + ".rels")] = (
        _relationships(b"", vml_rels), "")
    legacy = f'<legacyDrawing xmlns:r="{NS_R}" r:id="{vml_rid}"/>'.encode()
    data = _insert(data, AFTER_LEGACY, legacy)
    data = _insert(data, AFTER_OBJECTS, f'<oleObjects xmlns:r="{NS_R}">{"".join(objects)}</oleObjects>'.encode())
    edits[part] = data
    if rels_part in package.names:
        edits[rels_part] = _relationships(rels, new_rels)
    else:
        added[rels_part] = (_relationships(b"", new_rels), "")
    return True


def _name(lower: set[str], pattern: str) -> str:
    """The first free part name of ``pattern`` (numbered from 1), taken."""
    number = 1
    while pattern.format(number).lower() in lower:
        number += 1
    lower.add(pattern.format(number).lower())
    return pattern.format(number)


def _escape(text: str) -> str:
    return text.replace("&", "&amp;").replace('"', "&quot;").replace("<", "&lt;")


def _insert(data: bytes, before: re.Pattern[bytes], element: bytes) -> bytes:
    """``element`` put into the worksheet ``data`` right before what ``before`` finds after its cells."""
    start = max(data.find(b"</sheetData>"), data.find(b"<sheetData/>"), 0)
    match = before.search(data, start)
    if match is None:
        raise Unreadable("the worksheet does not end")
    return data[:match.start()] + element + data[match.start():]


Size = Callable[[int], float]


def _geometry(data: bytes) -> tuple[Size, Size]:
    """(width of a 0-based column in pixels, height of a 0-based row in points) as a worksheet's XML says."""
    head = data[:data.find(b"<sheetData")] if b"<sheetData" in data else b""
    default = re.search(rb"<sheetFormatPr\b[^>]*>", head)
    width = re.search(rb'defaultColWidth="([0-9.]+)"', default.group(0)) if default else None
    height = re.search(rb'defaultRowHeight="([0-9.]+)"', default.group(0)) if default else None
    spans = []
    for col in re.findall(rb"<col\b[^>]*>", head):
        found = dict(re.findall(rb'\b(min|max|width)="([0-9.]+)"', col))
        if len(found) == 3:
            spans.append((int(found[b"min"]) - 1, int(found[b"max"]) - 1, _pixels(float(found[b"width"]))))
    rows = {int(row) - 1: float(value) for row, value in re.findall(rb'<row r="([0-9]+)"[^>]*? ht="([0-9.]+)"', data)}
    column_default = _pixels(float(width.group(1))) if width else 64.0
    row_default = float(height.group(1)) if height else 15.0

    def column(index: int) -> float:
        return next((pixels for first, last, pixels in spans if first <= index <= last), column_default)

    return column, lambda index: rows.get(index, row_default)


def _pixels(width: float) -> float:
    """Pixels of a column ``width`` in characters, as Excel counts them."""
    return float(int(width * MAX_DIGIT_WIDTH + 0.5))


def _cells(anchor: tuple[int, ...], column: Size, row: Size) -> list[tuple[int, int, int, int]]:
    """The anchor's two corners as (column, offset in EMU, row, offset in EMU)."""
    return [(col, int(min(dx, 1024) / 1024 * column(col) * EMU_PER_PIXEL), rw,
             int(min(dy, 256) / 256 * row(rw) * EMU_PER_POINT)) for col, dx, rw, dy in (anchor[0:4], anchor[4:8])]


def _vml_shape(spid: int, rid: str, anchor: tuple[int, ...], column: Size, row: Size) -> str:
    """The VML shape that shows object ``spid`` with its image ``rid``, placed at ``anchor``."""
    def left(col: int, dx: int) -> float:  # points from the sheet's left edge
        return (sum(column(c) for c in range(col)) + min(dx, 1024) / 1024 * column(col)) * 0.75

    def top(rw: int, dy: int) -> float:
        return sum(row(r) for r in range(rw)) + min(dy, 256) / 256 * row(rw)

    col_l, dx_l, row_t, dy_t, col_r, dx_r, row_b, dy_b = anchor
    x, y = left(col_l, dx_l), top(row_t, dy_t)
    pixels = [int(min(dx_l, 1024) / 1024 * column(col_l)), int(min(dy_t, 256) / 256 * row(row_t) / 0.75),
              int(min(dx_r, 1024) / 1024 * column(col_r)), int(min(dy_b, 256) / 256 * row(row_b) / 0.75)]
    return (f'<v:shape id="_x0000_s{spid}" o:spid="_x0000_s{spid}" type="#_x0000_t75" style="position:absolute;'
            f'margin-left:{x:.2f}pt;margin-top:{y:.2f}pt;width:{left(col_r, dx_r) - x:.2f}pt;'
            f'height:{top(row_b, dy_b) - y:.2f}pt;z-index:{spid % 1024}" filled="t" fillcolor="window [65]" '
            f'stroked="t" strokecolor="windowText [64]" o:insetmode="auto"><v:fill color2="window [65]"/>'
            f'<v:imagedata o:relid="{rid}" o:title=""/><x:ClientData ObjectType="Pict"><x:SizeWithCells/>'
            f'<x:Anchor>{col_l}, {pixels[0]}, {row_t}, {pixels[1]}, {col_r}, {pixels[2]}, {row_b}, {pixels[3]}'
            f'</x:Anchor><x:CF>Pict</x:CF><x:AutoPict/></x:ClientData></v:shape>')


def _vml(index: int, shapes: list[str]) -> bytes:
    """A sheet's VML drawing holding ``shapes``: Excel shows an OLE object through it."""
    return ('<xml xmlns:v="urn:schemas-microsoft-com:vml" xmlns:o="urn:schemas-microsoft-com:office:office" '
            'xmlns:x="urn:schemas-microsoft-com:office:excel"><o:shapelayout v:ext="edit">'
            f'<o:idmap v:ext="edit" data="{index}"/></o:shapelayout><v:shapetype id="_x0000_t75" '
            'coordsize="21600,21600" o:spt="75" o:preferrelative="t" path="m@4@5l@4@11@9@11@9@5xe" filled="f" '
            'stroked="f"><v:stroke joinstyle="miter"/><v:path o:extrusionok="f" gradientshapeok="t" '
            'o:connecttype="rect"/><o:lock v:ext="edit" aspectratio="t"/></v:shapetype>'
            + "".join(shapes) + "</xml>").encode("utf-8")


def _relationships(rels: bytes, new: list[tuple[str, str, str]]) -> bytes:
    """Relationships part ``rels`` (b"": a new one) with the ``new`` (Id, type, target) ones added."""
    entries = "".join(f'<Relationship Id="{rid}" Type="{kind}" Target="{target}"/>' for rid, kind, target in new)
    if not rels:
        return ('<?xml version="1.0" encoding="UTF-8" standalone="yes"?>\n<Relationships xmlns='
                f'"{ooxml.PACKAGE_RELATIONSHIPS}">{entries}</Relationships>').encode()
    end = rels.rfind(b"</Relationships>")
    if end < 0:
        raise Unreadable("relationships without their end")
    return rels[:end] + entries.encode("utf-8") + rels[end:]


def _content_types(types: bytes, added: dict[str, tuple[bytes, str]]) -> bytes:
    """[Content_Types].xml with an Override for each added part that has a content type."""
    end = types.rfind(b"</Types>")
    if end < 0:
        raise Unreadable("[Content_Types].xml without its end")
    overrides = "".join(f'<Override PartName="/{name}" ContentType="{content_type}"/>'
                        for name, (_, content_type) in added.items() if content_type)
    return types[:end] + overrides.encode("utf-8") + types[end:]
