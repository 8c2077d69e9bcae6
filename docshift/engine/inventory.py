"""What a legacy Office file holds, what its OOXML result holds, and the fidelity report that compares them.

``of_source`` counts from the legacy file itself (its OLE storages and binary records, xlrd's cells), never from
what LibreOffice loaded; ``of_result`` counts the same things in the OOXML package; ``report`` compares the two.
The kinds of each file type are ``KINDS``; what each one counts:

- ``sheets`` (.xls): BOUNDSHEET records of worksheets, Excel 4 macro sheets and chart sheets (not the VBA module
  sheets of BIFF5) / the sheets of ``xl/workbook.xml``. Names compare cut to Excel's 31 characters.
- ``cells`` (.xls): xlrd's cells with a stored value: numbers, dates (the number stored), booleans, error values,
  non-empty text; a formula cell counts with its stored result. Blank cells and empty text do not count. In the
  result: the values of the ``<c>`` elements, shared strings resolved, read a megabyte at a time by a regular
  expression over LibreOffice's own layout (its matches checked against the part's count of ``</c>``, the part
  checked to end with its root; expat reads any other layout). ``result`` in the report is how many of the
  source's cells are equal in the result: numbers within a relative ``RELATIVE_TOLERANCE`` (LibreOffice writes 15
  significant digits), text exactly, booleans and error values as such; a workbook saved with the other date
  system has its date cells shifted by 1462 days.
- ``slides`` (.ppt): the slides of the SlideListWithText that the persist directory resolves ([MS-PPT] 2.1.2:
  Current User -> UserEditAtoms -> PersistDirectoryAtoms -> DocumentContainer; rebuilt from all the stream's
  PersistDirectoryAtoms when that chain is broken, as PowerPoint's repair does) / the slide list's slide parts.
- ``notes`` (.ppt): notes pages with text in their body placeholder / notes slides with text in ``ph type="body"``.
- ``characters`` (.doc, .ppt): non-whitespace characters of the body text, control characters left out. .doc: the
  main story of the piece table (CP 0 to ccpText) without field codes (0x13 code 0x14 result 0x15: the results
  stay); Word 6/95 files (8-bit text in each run's font's code page, not read here) count the characters beyond
  ASCII as one kind, ``FOLDED``. .docx: ``w:t``, ``w:delText`` and symbols of ``word/document.xml``, as
  ``ooxml.py`` counts them. .ppt: the text atoms of the slides (their SlideListWithText text and their own text
  boxes), without the "*" that fields stand on / ``a:t`` of the slides. The report compares them as multisets:
  ``result`` is how many of the source's characters the result holds, and ``TEXT_TOLERANCE_CHARACTERS`` +
  ``TEXT_TOLERANCE_RATIO`` of them may be missing without a loss (fields LibreOffice computes at load: dates,
  page and slide numbers; the same allowance as the output check of ``convert.py``).
- ``images``: distinct pictures the user placed. Source: the BLIPs (told apart by their MD4 uid) that OfficeArt
  shapes show with ``pib`` or a picture/texture ``fillBlip``, leaving out deleted shapes, OLE shapes (their
  preview), the own background of a slide that shows its master's, and masters no slide uses; in a .doc also the
  inline pictures (CHPX runs with sprmCPicLocation on a 0x01 of the text, not OLE previews, not form data).
  Result: distinct media parts referenced by ``a:blip``, ``v:imagedata`` or ``v:fill`` from content parts, outside
  OLE objects, controls and ``mc:Fallback`` renderings; charts' parts are not read.
- ``embedded_objects``: OLE objects: .doc ``ObjectPool`` storages and .xls ``MBD*`` storages (not linked objects,
  not ActiveX controls), .ppt ExEmbed objects a shape of a slide, used master or notes page shows. MS Graph
  charts of a .doc/.ppt are such objects (those formats have no charts of their own). Result: parts under
  ``*/embeddings/`` that no chart refers to (a chart's data), plus in .docx/.pptx the chart parts (made of MS
  Graph objects) and equations (``m:oMath``, made of Equation Editor objects).
- ``charts`` (.xls): chart substreams (BOF of type 0x20: chart sheets and embedded charts) / ``xl/charts/chart*``.
- ``comments``: .doc annotations (PlcfandRef), .xls NOTE records, .ppt Comment10 containers of the slides /
  ``w:comment``, ``<comment>`` of the sheets' comments parts, ``p:cm`` of the slides' comments parts.
- ``headers_footers``: .doc header/footer stories that show something and are in effect (even ones with facing
  pages only, first-page ones in sections with a title page only); .xls non-empty HEADER/FOOTER records of the
  worksheets; .ppt the date, slide number and footer the slides show (HeadersFootersAtom of the slide or the
  document, with text for a footer or fixed date, and a placeholder for it on the slide's master) / non-empty
  header and footer parts; non-empty ``oddHeader``/``oddFooter``; ``dt``/``sldNum``/``ftr`` placeholders on slides.
- ``macros``: VBA modules (``vba.modules``) on both sides; ``result`` is how many of the source's modules the result
  holds with the same code (line ends and trailing spaces aside).

Unknown: a count that cannot be read (damaged, encrypted or unsupported structures, the record budget spent) is
``None`` in ``Inventory.counts`` and ``null`` in the report. An unknown source count is not compared, so it never
makes a loss; an unknown result count is a loss where the source holds something of that kind.

Work is bounded: OLE streams are read whole only up to ``MAX_STREAM``, zip members are streamed and never inflated
past the size they declare nor ``MAX_PART``, record walks share a budget of ``MAX_RECORDS`` per file and nest at
most ``MAX_DEPTH`` deep, the .xls scan skips cell records in one step. Nothing here raises for a broken file.
"""

import html
import math
import posixpath
import re
import struct
import zipfile
from collections import Counter
from dataclasses import dataclass, field

import olefile

from docshift.engine import ooxml, vba

KINDS = {
    "doc": ("characters", "images", "embedded_objects", "comments", "headers_footers", "macros"),
    "xls": ("sheets", "cells", "images", "embedded_objects", "charts", "comments", "headers_footers", "macros"),
    "ppt": ("slides", "notes", "characters", "images", "embedded_objects", "comments", "headers_footers", "macros"),
}
LABELS = {"sheets": "sheets", "slides": "slides", "notes": "notes pages", "images": "images",
          "embedded_objects": "embedded objects", "charts": "charts", "comments": "comments",
          "headers_footers": "headers and footers", "macros": "VBA modules", "cells": "cells",
          "characters": "characters"}
SHEET_NAME_LIMIT = 31
TEXT_TOLERANCE_CHARACTERS = 8  # the allowance of convert.py's text check: fields computed at load
TEXT_TOLERANCE_RATIO = 0.001
RELATIVE_TOLERANCE = 1e-9  # numbers in cells; LibreOffice writes 15 significant digits
MAX_STREAM = 16 << 20  # uploads are at most 4 MiB (settings.MAX_UPLOAD_BYTES)
MAX_PART = 256 << 20
MAX_RECORDS = 2_000_000
MAX_DEPTH = 32
CHUNK = 1 << 20

# MS Graph and Equation Editor (LibreOffice turns them into a chart / a formula) by the CLSID of their storage
MSGRAPH_CLSIDS = {"00020801-0000-0000-C000-000000000046", "00020803-0000-0000-C000-000000000046"}
EQUATION_CLSIDS = {"0002CE02-0000-0000-C000-000000000046"}
EMBEDDED = ("object", "equation", "chart")  # the kinds of OLE storage that count as embedded objects


class _Unreadable(Exception):
    """A structure is broken, or reading it would exceed the budget: its count is unknown."""


class ErrorValue(str):
    """An error value of a cell (#N/A, #DIV/0! ...), told apart from text."""


class StoredDate(float):
    """A number stored in a date-formatted .xls cell (shifted when the result's 1904 date system differs)."""


@dataclass
class Inventory:
    """What one file holds: ``counts`` {what: int, or None when unknown}, and what the report compares in detail."""
    kind: str
    counts: dict
    sheets: list | None = None    # sheet names in order (.xls / .xlsx)
    cells: dict | None = None     # {sheet name: {b"B1": value}}; None when unreadable
    formulas: dict = field(default_factory=dict)  # result only: {sheet name: {refs of cells with a formula}}
    date1904: bool = False
    text: Counter | None = None   # non-whitespace characters of the body text
    macros: dict | None = None    # {VBA module name: code}
    where: dict = field(default_factory=dict)  # {what: [place names]} to name what is missing


class _Budget:
    """Records left to visit in one file, over all its walks."""

    def __init__(self, records=MAX_RECORDS):
        self.left = records

    def spend(self, n=1):
        self.left -= n
        if self.left < 0:
            raise _Unreadable("record budget exceeded")


# ---------------------------------------------------------------------------------------------------------------
# the legacy files
# ---------------------------------------------------------------------------------------------------------------

def of_source(path, kind):
    """The :class:`Inventory` of the legacy file ``path`` of ``kind`` ("doc", "xls" or "ppt"), counted from its
    OLE storages and records (and xlrd's cells). Never raises: what cannot be read is None (unknown)."""
    inventory = Inventory(kind, dict.fromkeys(KINDS[kind]))
    budget = _Budget()
    try:
        ole = olefile.OleFileIO(str(path))
    except Exception:  # not an OLE file, or its directory is broken: nothing can be counted
        ole = None
    if ole is not None:
        try:
            {"doc": _doc_source, "xls": _xls_source, "ppt": _ppt_source}[kind](ole, inventory, budget, path)
        except Exception:  # a reader missed a case: what it had not counted stays unknown
            pass
        finally:
            ole.close()
    _count_macros(path, inventory, lambda vba: vba.has_project(path, kind))
    return inventory


def _count_macros(path, inventory, present):
    """The VBA modules (``vba.modules``) when ``present`` (a cheap look for a project) says there may be some."""
    try:
        inventory.macros = vba.modules(path) if present(vba) else {}
        inventory.counts["macros"] = len(inventory.macros)
    except Exception:  # vba.modules does not raise; this is a last guard: the count stays unknown
        inventory.macros = None


def _attempt(function, *args):
    """``function(*args)``, or None when the structure it reads is broken."""
    try:
        return function(*args)
    except Exception:
        return None


def _stream(ole, name):
    """The whole OLE stream ``name`` (case-insensitive), None when it is missing; too large is unreadable."""
    if not ole.exists(name) or ole.get_type(name) != olefile.STGTY_STREAM:
        return None
    if ole.get_size(name) > MAX_STREAM:
        raise _Unreadable(f"stream {name} too large")
    with ole.openstream(name) as stream:
        return stream.read(MAX_STREAM)


def _embedded_objects(ole, parent=None, prefix=""):
    """How many of the OLE object storages under ``parent`` (the root when None), whose names start with
    ``prefix``, are embedded objects (MS Graph charts and equations included; not linked objects, not ActiveX
    controls); None when one of them cannot be read."""
    storages, members = [], {}
    for entry in ole.listdir(streams=True, storages=True):
        depth = 0 if parent is None else 1
        if parent is not None and (len(entry) < 2 or entry[0].lower() != parent.lower()):
            continue
        if len(entry) == depth + 1 and entry[depth].upper().startswith(prefix) \
                and ole.get_type(entry) == olefile.STGTY_STORAGE:
            storages.append("/".join(entry))
        elif len(entry) == depth + 2:
            members.setdefault("/".join(entry[:-1]).lower(), set()).add(entry[-1].lower())
    kinds = [_attempt(_object_class, ole, storage, members.get(storage.lower(), set())) for storage in storages]
    return None if None in kinds else sum(1 for kind in kinds if kind in EMBEDDED)


def _object_class(ole, storage, names):
    """"chart" (MS Graph), "equation", "control" (ActiveX), "link" (linked, not embedded) or "object"; ``names``
    are the lower-case names in the storage."""
    clsid = (ole.getclsid(storage) or "").upper()
    compobj = b""
    if "\x01compobj" in names:
        compobj = _attempt(_stream, ole, f"{storage}/\x01CompObj") or b""
    if clsid in MSGRAPH_CLSIDS or b"MSGraph.Chart" in compobj:
        return "chart"
    if clsid in EQUATION_CLSIDS or b"Equation.3" in compobj:
        return "equation"
    if "\x03ocxname" in names:
        return "control"
    if "\x01ole" in names:
        ole_stream = _attempt(_stream, ole, f"{storage}/\x01Ole") or b""
        if len(ole_stream) >= 8 and struct.unpack_from("<I", ole_stream, 4)[0] & 1:
            return "link"
    return "object"


# --- OfficeArt ([MS-ODRAW]), shared by the three formats -------------------------------------------------------

OA_DGG, OA_BSTORE, OA_SPGR, OA_SP, OA_FBSE, OA_FSP, OA_OPT, OA_TERTIARY_OPT = (
    0xF000, 0xF001, 0xF003, 0xF004, 0xF007, 0xF00A, 0xF00B, 0xF122)
OA_CLIENT_TEXTBOX, OA_CLIENT_DATA = 0xF00D, 0xF011
FSP_DELETED, FSP_OLE, FSP_BACKGROUND = 0x0008, 0x0010, 0x0400
PROP_PIB, PROP_FILL_TYPE, PROP_FILL_BLIP = 0x0104, 0x0180, 0x0186
FILL_TEXTURE, FILL_PICTURE = 2, 3


def _header(data, pos):
    """(recVer, recInstance, recType, body start, body end) of the 8-byte record header at ``pos``."""
    ver_instance, rec_type, length = struct.unpack_from("<HHI", data, pos)
    return ver_instance & 0xF, ver_instance >> 4, rec_type, pos + 8, pos + 8 + length


def _children(data, start, end, budget):
    """(recType, recInstance, recVer, body start, body end) of the records in ``data[start:end]``, one level."""
    pos = start
    end = min(end, len(data))
    while pos + 8 <= end:
        budget.spend()
        ver, instance, rec_type, body, stop = _header(data, pos)
        yield rec_type, instance, ver, body, min(stop, end)
        pos = stop


def _walk(data, start, end, budget, into=(), skip=(), only=None):
    """Every record in ``data[start:end]`` in document order, descending into containers (recVer 0xF) and the
    record types ``into``, not into those of ``skip``, and when ``only`` is given into those types alone:
    (recType, recInstance, recVer, body start, body end, depth)."""
    stack = [(start, min(end, len(data)), 0)]
    while stack:
        pos, stop, depth = stack.pop()
        if pos + 8 > stop:
            continue
        budget.spend()
        ver, instance, rec_type, body, body_end = _header(data, pos)
        body_end = min(body_end, stop)
        stack.append((body_end, stop, depth))  # the next sibling, after this record's children
        yield rec_type, instance, ver, body, body_end, depth
        if (ver == 0xF or rec_type in into) and rec_type not in skip and (only is None or rec_type in only) \
                and depth < MAX_DEPTH:
            stack.append((body, body_end, depth + 1))


def _bstore(data, start, end, budget):
    """The BStore entries of the OfficeArtDggContainer at ``data[start:end]``: [(uid, foDelay, size, has_blip)]."""
    entries = []
    for rec_type, _, _, body, stop, _ in _walk(data, start, end, budget):
        if rec_type == OA_FBSE and stop - body >= 36:
            uid = bytes(data[body + 2:body + 18])
            size, _, delay = struct.unpack_from("<III", data, body + 20)
            entries.append((uid, delay, size, stop - body > 36))
    return entries


@dataclass
class _Shape:
    """An OfficeArt shape: FSP flags, the BStore indexes of its pictures and, in PowerPoint, its text,
    placeholder type and OLE object reference."""
    flags: int = 0
    pibs: list = field(default_factory=list)
    placeholder: int | None = None
    text: str = ""
    object_ref: int | None = None


def _shapes(data, start, end, budget, client=None):
    """The shapes (:class:`_Shape`) of the OfficeArt drawing records in ``data[start:end]``. ``client`` reads
    the host's records inside a shape's client text box and client data (PowerPoint: text, placeholders)."""
    shapes = []
    for rec_type, _, _, body, stop, _ in _walk(data, start, end, budget, skip=(OA_SP,)):
        if rec_type != OA_SP:
            continue
        shape = _Shape()
        fill_type, fill_blip = 0, None
        for child, instance, _, child_body, child_stop in _children(data, body, stop, budget):
            if child == OA_FSP and child_stop - child_body >= 8:
                shape.flags = struct.unpack_from("<I", data, child_body + 4)[0]
            elif child in (OA_OPT, OA_TERTIARY_OPT):
                for index in range(min(instance, (child_stop - child_body) // 6)):
                    opid, value = struct.unpack_from("<HI", data, child_body + 6 * index)
                    number = opid & 0x3FFF
                    if number == PROP_PIB and opid & 0x4000:
                        shape.pibs.append(value)
                    elif number == PROP_FILL_TYPE:
                        fill_type = value
                    elif number == PROP_FILL_BLIP and opid & 0x4000:
                        fill_blip = value
            elif client and child in (OA_CLIENT_TEXTBOX, OA_CLIENT_DATA):
                client(shape, data, child_body, child_stop, budget)
        if fill_blip and fill_type in (FILL_TEXTURE, FILL_PICTURE):
            shape.pibs.append(fill_blip)
        shapes.append(shape)
    return shapes


def _pictures(shapes, bstore, present=lambda entry: entry[3] or entry[2] > 0):
    """The uids of the BStore entries that non-deleted, non-OLE ``shapes`` point to (1-based pib)."""
    found = set()
    for shape in shapes:
        if shape.flags & (FSP_DELETED | FSP_OLE):
            continue
        for pib in shape.pibs:
            if 1 <= pib <= len(bstore) and present(bstore[pib - 1]):
                uid = bstore[pib - 1][0]
                found.add(uid if any(uid) else ("entry", pib))
    return found


# --- .xls --------------------------------------------------------------------------------------------------------

BIFF_BOF = {0x0809, 0x0409, 0x0209, 0x0009}
BIFF_EOF, BIFF_CONTINUE, BIFF_BOUNDSHEET, BIFF_CODEPAGE = 0x000A, 0x003C, 0x0085, 0x0042
BIFF_NOTE, BIFF_HEADER, BIFF_FOOTER = 0x001C, 0x0014, 0x0015
BIFF_DRAWING_GROUP, BIFF_DRAWING, BIFF_FILEPASS, BIFF_OBJ, BIFF_TXO = 0x00EB, 0x00EC, 0x002F, 0x005D, 0x01B6
DT_GLOBALS, DT_WORKSHEET, DT_CHART, DT_MACRO_SHEET = 0x0005, 0x0010, 0x0020, 0x0040
# NUMBER, RK, MULRK, LABELSST, LABEL, FORMULA, STRING, BOOLERR, BLANK, MULBLANK, ROW, DBCELL
BIFF_CELLS = frozenset({0x0203, 0x027E, 0x00BD, 0x00FD, 0x0204, 0x0006, 0x0207, 0x0205, 0x0201, 0x00BE, 0x0208,
                        0x00D7})
SHEET_TYPES = {0: "worksheet", 1: "macro sheet", 2: "chart"}  # BOUNDSHEET.dt; 6 (VBA module) is no sheet
XL_ERRORS = {0x00: "#NULL!", 0x07: "#DIV/0!", 0x0F: "#VALUE!", 0x17: "#REF!", 0x1D: "#NAME?", 0x24: "#NUM!",
             0x2A: "#N/A", 0x2B: "#GETTING_DATA"}


@dataclass
class _Workbook:
    """What one pass over the BIFF records of a Workbook stream finds."""
    sheets: list = field(default_factory=list)      # names of the sheets in BOUNDSHEET order
    charts: int = 0
    notes: int = 0
    headers: list = field(default_factory=list)     # sheet names of each non-empty header/footer
    comments_at: list = field(default_factory=list)
    group: bytearray = field(default_factory=bytearray)    # MSODRAWINGGROUP and its CONTINUEs
    drawings: list = field(default_factory=list)    # one bytearray of MSODRAWING data per worksheet
    encrypted: bool = False
    globals: bool = False                           # BIFF2-4 files hold one sheet and no workbook globals


def _biff(data, budget):
    """One pass over the BIFF records of the Workbook stream (bounded by the budget)."""
    book = _Workbook()
    stack, biff8, codepage, last, drawing = [], True, "cp1252", None, None
    mode, text_left, runs_left = None, 0, 0
    if len(data) < 8 or struct.unpack_from("<H", data, 0)[0] not in BIFF_BOF:
        raise _Unreadable("the Workbook stream does not start with a BOF record")
    pos, size, substream, every_sheet = 0, len(data), -1, []
    header = struct.Struct("<HH").unpack_from
    while pos + 4 <= size:
        rec_type, length = header(data, pos)
        end = pos + 4 + length
        if rec_type in BIFF_CELLS:  # most of a sheet: nothing here needs them (xlrd reads the cells)
            pos, last, mode = end, rec_type, None
            continue
        body = pos + 4
        if end > size:
            break
        budget.spend()
        top = stack[-1] if stack else None
        if rec_type in BIFF_BOF and length >= 4:
            version, dt = struct.unpack_from("<HH", data, body)
            if not stack:
                if dt == DT_GLOBALS or dt == 0x0100:
                    biff8 = rec_type == 0x0809 and version == 0x0600
                    book.globals = True
                else:
                    substream += 1  # the sheets follow the globals in BOUNDSHEET order
                    drawing = bytearray()
                    book.drawings.append(drawing)
            stack.append(dt)
            if dt == DT_CHART:
                book.charts += 1
        elif rec_type == BIFF_EOF:
            if stack:
                stack.pop()
        elif top == DT_GLOBALS or (top == 0x0100):
            if rec_type == BIFF_BOUNDSHEET and length >= 8:
                name = _sheet_name(data, body + 6, end, biff8, codepage)
                every_sheet.append(name)
                if data[body + 5] in SHEET_TYPES:
                    book.sheets.append(name)
            elif rec_type == BIFF_CODEPAGE and length >= 2:
                number = struct.unpack_from("<H", data, body)[0]
                codepage = "utf_16_le" if number == 1200 else "cp1252" if number in (0x8000, 0x8001, 1252) \
                    else f"cp{number}"
            elif rec_type == BIFF_FILEPASS:
                book.encrypted = True
            elif rec_type == BIFF_DRAWING_GROUP or (rec_type == BIFF_CONTINUE and last == BIFF_DRAWING_GROUP):
                book.group += data[body:end]
        elif top in (DT_WORKSHEET, DT_MACRO_SHEET) and len(stack) == 1:
            name = every_sheet[substream] if 0 <= substream < len(every_sheet) else "?"
            if rec_type == BIFF_NOTE and length >= 6:
                row, column = struct.unpack_from("<HH", data, body)
                if biff8 or row != 0xFFFF:  # BIFF5 continues long notes in NOTE records of row 0xFFFF
                    book.notes += 1
                    cell = (COLUMNS[column] if column < len(COLUMNS) else b"?") + b"%d" % (row + 1)
                    book.comments_at.append(_place(name, cell.decode()))
            elif rec_type in (BIFF_HEADER, BIFF_FOOTER) and length:
                chars = struct.unpack_from("<H", data, body)[0] if biff8 and length >= 2 else data[body]
                if chars:
                    book.headers.append(_place(name, "header" if rec_type == BIFF_HEADER else "footer"))
            # drawing data: MSODRAWING records, and CONTINUE records after them, after OBJ records and after
            # a TXO's own CONTINUE records (its text and formatting runs)
            if rec_type == BIFF_DRAWING and drawing is not None:
                drawing += data[body:end]
                mode = "drawing"
            elif rec_type == BIFF_OBJ:
                mode = "drawing"
            elif rec_type == BIFF_TXO and length >= 14:
                text_left, runs_left = struct.unpack_from("<HH", data, body + 10)
                mode = "txo"
            elif rec_type == BIFF_CONTINUE and mode == "txo" and (text_left or runs_left):
                if text_left and length:
                    text_left = max(0, text_left - (length - 1) // (2 if data[body] & 1 else 1))
                else:
                    runs_left = max(0, runs_left - length)
            elif rec_type == BIFF_CONTINUE and mode and drawing is not None:
                drawing += data[body:end]
                mode = "drawing"
            elif rec_type != BIFF_CONTINUE:
                mode = None
        if rec_type != BIFF_CONTINUE:
            last = rec_type
        pos = end
    return book


def _sheet_name(data, pos, end, biff8, codepage):
    """The sheet name of a BOUNDSHEET record (a BIFF8 ShortXLUnicodeString, or BIFF5 8-bit text)."""
    length = data[pos]
    if biff8:
        if data[pos + 1] & 1:
            return bytes(data[pos + 2:min(end, pos + 2 + 2 * length)]).decode("utf_16_le", "replace")
        return bytes(data[pos + 2:min(end, pos + 2 + length)]).decode("latin-1")
    try:
        return bytes(data[pos + 1:min(end, pos + 1 + length)]).decode(codepage, "replace")
    except LookupError:
        return bytes(data[pos + 1:min(end, pos + 1 + length)]).decode("cp1252", "replace")


def _xls_source(ole, inventory, budget, path):
    """Counts of an .xls: one pass over the BIFF records, its MBD storages, xlrd for the cells."""
    counts = inventory.counts
    name = "Workbook" if ole.exists("Workbook") else "Book"
    data = _stream(ole, name)
    if data is None:
        return
    book = _biff(data, budget)
    if book.encrypted:
        return
    if book.globals:
        inventory.sheets = book.sheets
        counts["sheets"] = len(book.sheets)
    counts["comments"] = book.notes
    inventory.where["comments"] = book.comments_at
    counts["headers_footers"] = len(book.headers)
    inventory.where["headers_footers"] = book.headers
    counts["charts"] = book.charts
    counts["embedded_objects"] = _attempt(_embedded_objects, ole, None, "MBD")
    try:
        bstore = _bstore(book.group, 0, len(book.group), budget) if book.group else []
        found = set()
        for drawing in book.drawings:
            found |= _pictures(_shapes(drawing, 0, len(drawing), budget), bstore)
        counts["images"] = len(found)
    except Exception:
        pass
    _xls_cells(path, inventory)


class _Discard:
    """xlrd's log, not kept."""
    def write(self, _):
        pass


def _column_names(limit):
    """[b"A", b"B", ... ] for ``limit`` columns."""
    names = []
    for index in range(limit):
        name, n = "", index + 1
        while n:
            n, rest = divmod(n - 1, 26)
            name = chr(65 + rest) + name
        names.append(name.encode())
    return names


COLUMNS = _column_names(16384)


def _xls_cells(path, inventory):
    """xlrd's cells with a stored value, by sheet name: {b"B1": float | StoredDate | str | bool | ErrorValue}."""
    import xlrd
    try:
        book = xlrd.open_workbook(str(path), logfile=_Discard(), ragged_rows=True)
    except Exception:  # encrypted, damaged, not BIFF: the cells are unknown
        return
    try:
        cells, total = {}, 0
        for sheet in book.sheets():
            found = cells.setdefault(sheet.name, {})
            for row in range(sheet.nrows):
                label = b"%d" % (row + 1)
                for column, (ctype, value) in enumerate(zip(sheet.row_types(row), sheet.row_values(row))):
                    if ctype == 2:
                        found[COLUMNS[column] + label] = float(value)
                    elif ctype == 1:
                        if value:
                            found[COLUMNS[column] + label] = value
                    elif ctype == 3:
                        found[COLUMNS[column] + label] = StoredDate(value)
                    elif ctype == 4:
                        found[COLUMNS[column] + label] = bool(value)
                    elif ctype == 5:
                        found[COLUMNS[column] + label] = ErrorValue(XL_ERRORS.get(value, f"#ERR{value}"))
            total += len(found)
        inventory.cells = cells
        inventory.date1904 = bool(book.datemode)
        inventory.counts["cells"] = total
    except Exception:
        pass
    finally:
        book.release_resources()


# --- .doc --------------------------------------------------------------------------------------------------------

FIB_ENCRYPTED, FIB_WHICH_TABLE, FIB_COMPLEX = 0x0100, 0x0200, 0x0004
# indexes of FibRgFcLcb97 pairs (the same order as Word 6's FIB, whose pairs start at 0x58)
PAIR_PLCF_AND_REF, PAIR_PLCF_SED, PAIR_PLCF_HDD, PAIR_PLCF_BTE_CHPX, PAIR_DOP, PAIR_CLX, PAIR_DGG_INFO = (
    4, 6, 11, 12, 31, 33, 50)
SPRM_FSPEC, SPRM_PIC_LOCATION, SPRM_FOLE2, SPRM_FDATA, SPRM_TITLE_PAGE = 0x0855, 0x6A03, 0x080A, 0x0806, 0x300A
ANNOTATION_SIZE = 4 + 30  # a CP and an ATRDPre10
CONTROL = {c: None for c in range(0x20)}
CONTROL.update({0x1E: "\u2011", 0x1F: "\u00ad"})  # non-breaking and soft hyphens: .docx writes them as elements
FIELD_MARKS = re.compile("[\x13\x14\x15]")
FOLDED = "\uffff"  # stands for any character beyond ASCII in the text of a Word 6/95 file


@dataclass
class _Word:
    """The parts of a Word binary file that the counts read: its streams, FIB values and piece table."""
    word: bytes
    table: bytes
    nfib: int
    flags: int
    ccp: list        # ccpText, ccpFtn, ccpHdd, ccpMcr, ccpAtn
    pairs: list      # [(fc, lcb)]
    pieces: list     # [(cp start, cp end, fc, compressed)]

    def pair(self, index):
        return self.pairs[index] if index < len(self.pairs) else (0, 0)

    def text(self, start, end):
        """The characters of CPs ``start`` to ``end``, from the pieces that hold them."""
        parts = []
        for cp_start, cp_end, fc, compressed in self.pieces:
            low, high = max(start, cp_start), min(end, cp_end)
            if low >= high:
                continue
            if compressed:
                offset = fc + (low - cp_start)
                parts.append(self.word[offset:offset + high - low].decode("cp1252", "replace"))
            else:
                offset = fc + 2 * (low - cp_start)
                parts.append(self.word[offset:offset + 2 * (high - low)].decode("utf_16_le", "replace"))
        return "".join(parts)

    def live(self, fc):
        """Is the byte offset ``fc`` of the WordDocument stream inside a piece of the text?"""
        for cp_start, cp_end, start, compressed in self.pieces:
            if start <= fc < start + (cp_end - cp_start) * (1 if compressed else 2):
                return True
        return False


def _fib(word, table_of):
    """The :class:`_Word` of the WordDocument stream ``word`` (``table_of(name)`` reads a table stream)."""
    ident, nfib = struct.unpack_from("<HH", word, 0)
    flags = struct.unpack_from("<H", word, 0x0A)[0]
    if ident not in (0xA5EC, 0xA5DC) or flags & FIB_ENCRYPTED:
        raise _Unreadable("no Word FIB, or encrypted")
    if nfib >= 0xC0:  # Word 97 and later: FibBase, FibRgW97, FibRgLw97, FibRgFcLcb
        csw = struct.unpack_from("<H", word, 32)[0]
        pos = 34 + 2 * csw
        cslw = struct.unpack_from("<H", word, pos)[0]
        lw = struct.unpack_from(f"<{cslw}I", word, pos + 2)
        pos += 2 + 4 * cslw
        pairs_count = struct.unpack_from("<H", word, pos)[0]
        raw = struct.unpack_from(f"<{2 * pairs_count}I", word, pos + 2)
        ccp = list(lw[3:8])
        table = table_of("1Table" if flags & FIB_WHICH_TABLE else "0Table")
    else:  # Word 6 and 95: one fixed layout, the table data inside the WordDocument stream
        ccp = list(struct.unpack_from("<5I", word, 0x34))
        raw = struct.unpack_from("<112I", word, 0x58)
        table = word
    if table is None:
        raise _Unreadable("no table stream")
    pairs = [(raw[2 * i], raw[2 * i + 1]) for i in range(len(raw) // 2)]
    return _Word(word, table, nfib, flags, ccp, pairs, [])


def _pieces(doc):
    """The piece table of the CLX: [(cp start, cp end, fc, compressed)]."""
    fc, lcb = doc.pair(PAIR_CLX)
    table, modern = doc.table, doc.nfib >= 0xC0
    if not lcb:
        if modern or doc.flags & FIB_COMPLEX:
            raise _Unreadable("no piece table")
        fc_min = struct.unpack_from("<I", doc.word, 0x18)[0]  # Word 6 non-complex: one run of 8-bit text
        return [(0, sum(doc.ccp) + 1, fc_min, True)]
    pos, end = fc, min(fc + lcb, len(table))
    while pos < end and table[pos] == 0x01:  # Prc: property modifiers before the piece table
        pos += 3 + struct.unpack_from("<H", table, pos + 1)[0]
    if pos >= end or table[pos] != 0x02:
        raise _Unreadable("no Pcdt")
    length = struct.unpack_from("<I", table, pos + 1)[0]
    pos += 5
    count = (length - 4) // 12
    if count <= 0 or pos + length > len(table):
        raise _Unreadable("bad piece table")
    cps = struct.unpack_from(f"<{count + 1}I", table, pos)
    pieces = []
    for index in range(count):
        value = struct.unpack_from("<I", table, pos + 4 * (count + 1) + 8 * index + 2)[0]
        if modern:
            compressed = bool(value & 0x40000000)
            offset = (value & 0x3FFFFFFF) // 2 if compressed else value & 0x3FFFFFFF
        else:
            compressed, offset = True, value
        if cps[index + 1] > cps[index]:
            pieces.append((cps[index], cps[index + 1], offset, compressed))
    return pieces


def _visible(text):
    """``text`` without its field codes (0x13 code 0x14 result 0x15; nested fields too)."""
    if "\x13" not in text:
        return text
    kept, stack, pos = [], [], 0
    for mark in FIELD_MARKS.finditer(text):
        if all(stack):
            kept.append(text[pos:mark.start()])
        char = mark.group()
        if char == "\x13":
            stack.append(False)
        elif char == "\x14" and stack:
            stack[-1] = True
        elif char == "\x15" and stack:
            stack.pop()
        pos = mark.end()
    if all(stack):
        kept.append(text[pos:])
    return "".join(kept)


def _characters(text):
    """The non-whitespace characters of ``text`` as a multiset, control characters left out."""
    return Counter("".join(text.translate(CONTROL).split()))


def _fold(characters):
    """``characters`` with every character beyond ASCII counted as ``FOLDED``."""
    folded = Counter({char: n for char, n in characters.items() if char < "\x80"})
    beyond = sum(n for char, n in characters.items() if char >= "\x80")
    if beyond:
        folded[FOLDED] = beyond
    return folded


def _has_content(text):
    """Does a header/footer story show anything: text, or a picture or drawing (0x01, 0x08)?"""
    text = _visible(text)
    return "\x01" in text or "\x08" in text or bool("".join(text.translate(CONTROL).split()))


def _sprms(grpprl):
    """(sprm, operand) of a grpprl (Word 97 two-byte sprms)."""
    pos, end = 0, len(grpprl)
    while pos + 2 <= end:
        sprm = struct.unpack_from("<H", grpprl, pos)[0]
        pos += 2
        size = (1, 1, 2, 4, 2, 2, None, 3)[sprm >> 13]
        if size is None:
            if sprm == 0xD608 and pos + 2 <= end:
                size = struct.unpack_from("<H", grpprl, pos)[0] + 1
            elif pos < end:
                size = grpprl[pos] + 1
            else:
                return
        yield sprm, grpprl[pos:pos + size]
        pos += size


def _doc_source(ole, inventory, budget, path):
    """Counts of a .doc: FIB, piece table, PlcfandRef, PlcfHdd, CHPX and DggInfo, ObjectPool."""
    counts = inventory.counts
    word = _stream(ole, "WordDocument")
    if word is None:
        return
    doc = _fib(word, lambda name: _stream(ole, name))  # raises for an encrypted file: all stays unknown
    counts["embedded_objects"] = _attempt(_embedded_objects, ole, "ObjectPool")
    doc.pieces = _pieces(doc)
    inventory.text = _characters(_visible(doc.text(0, doc.ccp[0])))
    if doc.nfib < 0xC0:
        # Word 6/95: 8-bit text in the code page of each run's font, which is not read here: the characters
        # beyond ASCII count as one kind. Annotations, headers and pictures have other layouts: unknown.
        inventory.text = _fold(inventory.text)
        counts["characters"] = inventory.text.total()
        return
    counts["characters"] = inventory.text.total()
    fc, lcb = doc.pair(PAIR_PLCF_AND_REF)
    counts["comments"] = max(0, (lcb - 4) // ANNOTATION_SIZE) if lcb else 0
    counts["headers_footers"] = _attempt(_doc_headers, doc)
    data = _attempt(_stream, ole, "Data")
    counts["images"] = _attempt(_doc_images, doc, data, budget)


def _doc_headers(doc):
    """The header/footer stories in effect that show something."""
    fc, lcb = doc.pair(PAIR_PLCF_HDD)
    if lcb < 8:
        return 0
    cps = struct.unpack_from(f"<{lcb // 4}I", doc.table, fc)
    start = doc.ccp[0] + doc.ccp[1]
    facing = False
    dop_fc, dop_lcb = doc.pair(PAIR_DOP)
    if dop_lcb:
        facing = bool(doc.table[dop_fc] & 1)
    title_pages = []
    sed_fc, sed_lcb = doc.pair(PAIR_PLCF_SED)
    sections = (sed_lcb - 4) // 16 if sed_lcb >= 20 else 0
    for index in range(sections):
        sepx = struct.unpack_from("<I", doc.table, sed_fc + 4 * (sections + 1) + 12 * index + 2)[0]
        title = False
        if sepx != 0xFFFFFFFF and sepx + 2 <= len(doc.word):
            size = struct.unpack_from("<H", doc.word, sepx)[0]
            for sprm, operand in _sprms(doc.word[sepx + 2:sepx + 2 + size]):
                if sprm == SPRM_TITLE_PAGE and operand:
                    title = bool(operand[0])
        title_pages.append(title)
    found = 0
    for story in range(6, len(cps) - 1):
        section, role = divmod(story - 6, 6)
        if section >= max(1, sections):
            break
        if role in (0, 2) and not facing:
            continue
        if role in (4, 5) and not (section < len(title_pages) and title_pages[section]):
            continue
        if cps[story + 1] > cps[story] and _has_content(doc.text(start + cps[story], start + cps[story + 1])):
            found += 1
    return found


def _doc_images(doc, data, budget):
    """Distinct pictures: inline ones (CHPX runs with a picture location on a live 0x01) and the floating
    shapes of the OfficeArt drawing (DggInfo)."""
    found = set()
    fc, lcb = doc.pair(PAIR_PLCF_BTE_CHPX)
    count = (lcb - 4) // 8 if lcb >= 12 else 0
    word = doc.word
    pictures, ole_runs = [], []
    for index in range(count):
        page_number = struct.unpack_from("<I", doc.table, fc + 4 * (count + 1) + 4 * index)[0] & 0x3FFFFF
        page = word[page_number * 512:page_number * 512 + 512]
        if len(page) < 512:
            continue
        runs = page[511]
        if 5 * runs + 4 > 511:
            continue
        budget.spend(runs + 1)
        bounds = struct.unpack_from(f"<{runs + 1}I", page, 0)
        for run in range(runs):
            offset = page[4 * (runs + 1) + run] * 2
            if not offset:
                continue
            properties = dict(_sprms(page[offset + 1:offset + 1 + page[offset]]))
            if properties.get(SPRM_FOLE2, b"\0")[:1] == b"\1":
                ole_runs.append((bounds[run], bounds[run + 1]))
                continue
            location = properties.get(SPRM_PIC_LOCATION)
            if location is None or len(location) < 4 or properties.get(SPRM_FSPEC, b"\0")[:1] != b"\1" \
                    or properties.get(SPRM_FDATA, b"\0")[:1] == b"\1":
                continue
            pictures.append((bounds[run], bounds[run + 1], struct.unpack_from("<I", location)[0]))
    locations = set()
    for start, end, location in pictures:
        for position in _picture_characters(doc, start, end, budget):
            # the picture right after the separator of an EMBED field (an fOle2 run) is the object's preview
            if not any(low < position <= high for low, high in ole_runs):
                locations.add(location)
                break
    for location in locations:
        uid = _inline_picture(data, location, budget) if data else None
        if uid is not None:
            found.add(uid)
    fc, lcb = doc.pair(PAIR_DGG_INFO)
    if lcb:
        table, end = doc.table, min(fc + lcb, len(doc.table))
        _, _, rec_type, body, stop = _header(table, fc)
        bstore = _bstore(table, body, min(stop, end), budget) if rec_type == OA_DGG else []
        shapes, pos = [], min(stop, end)
        while pos + 9 <= end:
            _, _, rec_type, body, stop = _header(table, pos + 1)  # a dgglbl byte before each drawing
            if rec_type != 0xF002:
                break
            shapes += _shapes(table, body, min(stop, end), budget)
            pos = stop
        found |= _pictures(shapes, bstore, lambda entry: entry[1] < len(word) or entry[3])
    return len(found)


def _picture_characters(doc, start, end, budget):
    """The byte offsets of the 0x01 characters of the text pieces between ``start`` and ``end`` (FCs)."""
    for _, (cp_start, cp_end, fc, compressed) in zip(range(100_000), doc.pieces):
        width = 1 if compressed else 2
        low, high = max(start, fc), min(end, fc + (cp_end - cp_start) * width)
        if low >= high:
            continue
        low += (low - fc) % width
        budget.spend((high - low) // 4096)
        pattern = b"\x01" if compressed else b"\x01\x00"
        position = doc.word.find(pattern, low, high)
        while position >= 0:
            if (position - fc) % width == 0:
                yield position
            position = doc.word.find(pattern, position + 1, high)


def _inline_picture(data, location, budget):
    """The uid of the picture at ``location`` of the Data stream (PICF then OfficeArtInlineSpContainer), or None
    when there is no picture data there."""
    if location + 10 > len(data):
        return None
    size, header_size, mode = struct.unpack_from("<IHH", data, location)
    end = min(location + size, len(data))
    if size <= header_size:
        return None
    if mode not in (0x64, 0x66):  # [MS-DOC] allows no other mapping mode
        return None
    pos = location + header_size
    if mode == 0x66:
        pos += 1 + data[pos]
    shapes, entries = [], []
    for rec_type, _, _, body, stop in _children(data, pos, end, budget):
        if rec_type == OA_SP:
            shapes = _shapes(data, body - 8, stop, budget)
        elif rec_type == OA_FBSE and stop - body > 36:
            entries.append(bytes(data[body + 2:body + 18]))
    if not entries:
        return None
    pibs = [pib for shape in shapes for pib in shape.pibs if 1 <= pib <= len(entries)]
    uid = entries[pibs[0] - 1] if pibs else entries[0]
    return uid if any(uid) else ("inline", location)


# --- .ppt --------------------------------------------------------------------------------------------------------

RT_DOCUMENT, RT_SLIDE, RT_SLIDE_ATOM, RT_NOTES, RT_MAIN_MASTER = 0x03E8, 0x03EE, 0x03EF, 0x03F0, 0x03F8
RT_SLIDE_LIST, RT_SLIDE_PERSIST, RT_DRAWING_GROUP, RT_DRAWING = 0x0FF0, 0x03F3, 0x040B, 0x040C
RT_EXOBJ_LIST, RT_EXEMBED, RT_EXOLEOBJ_ATOM, RT_CSTRING, RT_EXOBJ_REF = 0x0409, 0x0FCC, 0x0FC3, 0x0FBA, 0x0BC1
RT_TEXT_HEADER, RT_TEXT_CHARS, RT_TEXT_BYTES, RT_PLACEHOLDER, RT_COMMENT10 = 0x0F9F, 0x0FA0, 0x0FA8, 0x0BC3, 0x2EE0
RT_HEADERS_FOOTERS, RT_HEADERS_FOOTERS_ATOM, RT_BINARY_TAG_DATA = 0x0FD9, 0x0FDA, 0x138B
COMMENT_PATH = (0x1388, 0x138A, RT_BINARY_TAG_DATA)  # ProgTags -> ProgBinaryTag -> BinaryTagDataBlob -> Comment10
RT_USER_EDIT, RT_PERSIST_DIRECTORY, RT_CURRENT_USER = 0x0FF5, 0x1772, 0x0FF6
# fields in text: each stands on a "*" of the text atom (slide number, dates, header, footer)
RT_FIELDS = {0x0FD8, 0x0FF7, 0x0FF8, 0x0FF9, 0x0FFA, 0x1015}
PT_NOTES_BODY = 0x0C
SLIDE_MASTER_BACKGROUND = 0x0004  # SlideAtom.slideFlags.fMasterBackground
MASTER_PLACEHOLDERS = {0x07: "dt", 0x08: "sldNum", 0x09: "ftr"}  # PT_MasterDate, PT_MasterSlideNumber, PT_MasterFooter
HF_DATE, HF_TODAY, HF_SLIDE_NUMBER, HF_FOOTER = 0x01, 0x02, 0x08, 0x20
MAX_USER_EDITS = 4096


def _ppt_directory(current, doc, budget):
    """(docPersistIdRef, {persist id: offset}) of the live edit ([MS-PPT] 2.1.2)."""
    if len(current) < 20:
        raise _Unreadable("no CurrentUserAtom")
    _, _, rec_type, _, _ = _header(current, 0)
    token, offset = struct.unpack_from("<II", current, 12)
    if rec_type != RT_CURRENT_USER or token == 0xF3D1C4DF:
        raise _Unreadable("no CurrentUserAtom, or encrypted")
    directory, doc_ref, seen = {}, None, set()
    while offset and offset not in seen and len(seen) < MAX_USER_EDITS and offset + 8 <= len(doc):
        seen.add(offset)
        budget.spend()
        _, _, rec_type, body, stop = _header(doc, offset)
        if rec_type != RT_USER_EDIT or stop - body < 28:
            break  # a damaged chain: what was read so far stands, _ppt_rescan may fill in
        last_edit, persist_offset, edit_doc_ref = struct.unpack_from("<III", doc, body + 8)
        if doc_ref is None:
            doc_ref = edit_doc_ref
            if stop - body >= 32 and struct.unpack_from("<I", doc, body + 28)[0]:
                raise _Unreadable("encrypted")
        if persist_offset + 8 <= len(doc):
            _persist_entries(doc, persist_offset, directory, budget, newest_first=True)
        offset = last_edit
    if doc_ref is None:
        raise _Unreadable("no UserEditAtom")
    return doc_ref, directory


def _persist_entries(doc, offset, directory, budget, newest_first):
    """Add the entries of the PersistDirectoryAtom at ``offset`` to ``directory``."""
    _, _, rec_type, pos, end = _header(doc, offset)
    if rec_type != RT_PERSIST_DIRECTORY:
        return
    end = min(end, len(doc))
    while pos + 4 <= end:
        word = struct.unpack_from("<I", doc, pos)[0]
        first, count = word & 0xFFFFF, min(word >> 20, (end - pos - 4) // 4)
        budget.spend(count)
        for index, object_offset in enumerate(struct.unpack_from(f"<{count}I", doc, pos + 4)):
            if newest_first:
                directory.setdefault(first + index, object_offset)
            else:
                directory[first + index] = object_offset
        pos += 4 + 4 * count


def _ppt_rescan(doc, budget):
    """The persist directory rebuilt from every PersistDirectoryAtom of the stream, later ones winning: what
    PowerPoint's own repair does when the chain of UserEditAtoms is broken."""
    directory = {}
    for rec_type, _, _, body, _ in _children(doc, 0, len(doc), budget):
        if rec_type == RT_PERSIST_DIRECTORY:
            _persist_entries(doc, body - 8, directory, budget, newest_first=False)
    return directory


def _ppt_text(data, start, end, budget):
    """The text of the text atoms among the records of ``data[start:end]`` (not descending), without the "*"
    that fields stand on."""
    parts, fields = [], 0
    for rec_type, _, _, body, stop in _children(data, start, end, budget):
        if rec_type == RT_TEXT_CHARS:
            parts.append(bytes(data[body:stop]).decode("utf_16_le", "replace"))
        elif rec_type == RT_TEXT_BYTES:
            parts.append(bytes(data[body:stop]).decode("latin-1"))
        elif rec_type in RT_FIELDS:
            fields += 1
    text = "\n".join(parts)
    return text.replace("*", "", fields) if fields else text


def _ppt_client(shape, data, start, end, budget):
    """A shape's PowerPoint records: its text, placeholder type and OLE object reference."""
    for rec_type, _, _, body, stop in _children(data, start, end, budget):
        if rec_type == RT_PLACEHOLDER and stop - body >= 5:
            shape.placeholder = data[body + 4]
        elif rec_type == RT_EXOBJ_REF and stop - body >= 4:
            shape.object_ref = struct.unpack_from("<I", data, body)[0]
    shape.text += _ppt_text(data, start, end, budget)


class _Presentation:
    """The live objects of a "PowerPoint Document" stream, found through its persist directory."""

    def __init__(self, doc, current, budget):
        self.doc, self.budget = doc, budget
        doc_ref, self.directory = _ppt_directory(current, doc, budget)
        self.rescanned = False
        located = self.container(doc_ref, RT_DOCUMENT)
        if located is None:
            raise _Unreadable("no DocumentContainer")
        self.document = located

    def container(self, ref, *expected):
        """(body start, body end) of persist object ``ref`` if it is a record of one of the ``expected`` types.
        A reference the directory lacks makes it rebuilt once from the whole stream."""
        offset = self.directory.get(ref)
        if offset is None and not self.rescanned:
            self.rescanned = True
            self.directory = {**_ppt_rescan(self.doc, self.budget), **self.directory}
            offset = self.directory.get(ref)
        if offset is None or offset + 8 > len(self.doc):
            return None
        _, _, rec_type, body, stop = _header(self.doc, offset)
        return (body, min(stop, len(self.doc))) if rec_type in expected else None

    def shapes(self, located):
        """The shapes of the PPDrawing of a slide, master or notes container."""
        shapes = []
        for rec_type, _, _, body, stop in _children(self.doc, *located, self.budget):
            if rec_type == RT_DRAWING:
                shapes += _shapes(self.doc, body, stop, self.budget, client=_ppt_client)
        return shapes

    def headers_footers(self, start, end):
        """The date, slide number and footer items a HeadersFootersContainer in ``doc[start:end]`` shows."""
        flags, strings = None, {}
        for rec_type, instance, _, body, stop in _children(self.doc, start, end, self.budget):
            if rec_type == RT_HEADERS_FOOTERS_ATOM and stop - body >= 4:
                flags = struct.unpack_from("<H", self.doc, body + 2)[0]
            elif rec_type == RT_CSTRING:
                strings[instance] = bytes(self.doc[body:stop]).decode("utf_16_le", "replace").strip()
        if flags is None:
            return None
        shown = set()
        if flags & HF_DATE and (flags & HF_TODAY or strings.get(0)):
            shown.add("dt")
        if flags & HF_SLIDE_NUMBER:
            shown.add("sldNum")
        if flags & HF_FOOTER and strings.get(2):
            shown.add("ftr")
        return shown


def _ppt_source(ole, inventory, budget, path):
    """Counts of a .ppt, from the live DocumentContainer and the slides, masters and notes it lists."""
    counts = inventory.counts
    doc = _stream(ole, "PowerPoint Document")
    current = _stream(ole, "Current User")
    if doc is None or current is None:
        return
    show = _Presentation(doc, current, budget)
    lists, bstore, embeds, slide_footers = {0: [], 1: [], 2: []}, [], {}, set()
    for rec_type, instance, _, body, stop in _children(doc, *show.document, budget):
        if rec_type == RT_SLIDE_LIST and instance in lists:
            entries = lists[instance]
            for child, _, _, child_body, child_stop in _children(doc, body, stop, budget):
                if child == RT_SLIDE_PERSIST and child_stop - child_body >= 16:
                    ref, _, _, slide_id = struct.unpack_from("<IIII", doc, child_body)
                    entries.append([ref, slide_id, child_stop, child_stop])
                elif entries:
                    entries[-1][3] = child_stop  # the text records of the slide run up to the next persist atom
        elif rec_type == RT_DRAWING_GROUP:
            bstore = _bstore(doc, body, stop, budget)
        elif rec_type == RT_EXOBJ_LIST:
            embeds = _ppt_embeds(doc, body, stop, budget)
        elif rec_type == RT_HEADERS_FOOTERS and instance == 3:
            slide_footers = show.headers_footers(body, stop) or set()
    # the masters: their placeholders (a date, slide number or footer shows only where the master has one)
    masters = {}
    for ref, slide_id, _, _ in lists[1]:
        located = show.container(ref, RT_MAIN_MASTER, RT_SLIDE)
        if located is not None:
            master_shapes = show.shapes(located)
            placeholders = {MASTER_PLACEHOLDERS[shape.placeholder] for shape in master_shapes
                            if shape.placeholder in MASTER_PLACEHOLDERS}
            masters[slide_id] = [master_shapes, placeholders, _slide_atom(doc, located, budget)[0], False]
    text, comments, shapes, notes, footers = Counter(), 0, [], 0, set()
    slides = 0
    for ref, _, text_start, text_end in lists[0]:
        located = show.container(ref, RT_SLIDE)
        if located is None:
            raise _Unreadable("a slide of the slide list is missing")
        slides += 1
        slide_shapes = show.shapes(located)
        master_id, slide_flags = _slide_atom(doc, located, budget)
        if slide_flags & SLIDE_MASTER_BACKGROUND:  # the slide shows its master's background, not its own
            slide_shapes = [shape for shape in slide_shapes if not shape.flags & FSP_BACKGROUND]
        shapes += slide_shapes
        text.update(_characters(_ppt_text(doc, text_start, text_end, budget)
                                + "".join(shape.text for shape in slide_shapes)))
        own_footers = None
        for rec_type, instance, _, body, stop in _children(doc, *located, budget):
            if rec_type == RT_HEADERS_FOOTERS:
                own_footers = show.headers_footers(body, stop)
        master = masters.get(master_id)
        if master is not None:
            footers |= (slide_footers if own_footers is None else own_footers) & master[1]
            master[3] = True
            if master[2] in masters:  # a title master uses a main master
                masters[master[2]][3] = True
        for rec_type, _, _, _, _, _ in _walk(doc, *located, budget, into=(RT_BINARY_TAG_DATA,), only=COMMENT_PATH):
            comments += rec_type == RT_COMMENT10
    counts["slides"] = slides
    inventory.text = text
    counts["characters"] = text.total()
    counts["comments"] = comments
    counts["headers_footers"] = len(footers)
    for master_shapes, _, _, used in masters.values():
        if used:  # pictures on masters no slide uses are not shown
            shapes += master_shapes
    for ref, _, text_start, text_end in lists[2]:
        located = show.container(ref, RT_NOTES)
        if located is None:
            continue
        note_shapes = show.shapes(located)
        shapes += note_shapes
        written = _ppt_text(doc, text_start, text_end, budget)
        written += "".join(s.text for s in note_shapes if s.placeholder == PT_NOTES_BODY)
        notes += bool(_characters(written))
    counts["notes"] = notes
    used = {shape.object_ref for shape in shapes if shape.object_ref is not None and not shape.flags & FSP_DELETED}
    counts["embedded_objects"] = sum(1 for ident in embeds if ident in used)
    size = ole.get_size("Pictures") if ole.exists("Pictures") else 0
    counts["images"] = len(_pictures(shapes, bstore, lambda entry: entry[3] or entry[1] < size))


def _slide_atom(doc, located, budget):
    """(masterIdRef, slideFlags) of the SlideAtom of a slide (or title master) container, or (None, 0)."""
    for rec_type, _, _, body, stop in _children(doc, *located, budget):
        if rec_type == RT_SLIDE_ATOM and stop - body >= 22:
            master, flags = struct.unpack_from("<I4xH", doc, body + 12)
            return master, flags
    return None, 0


def _ppt_embeds(doc, start, end, budget):
    """{exObjId: progId} of the embedded (not linked) OLE objects of the ExObjList."""
    embeds = {}
    for rec_type, _, _, body, stop in _children(doc, start, end, budget):
        if rec_type != RT_EXEMBED:
            continue
        kind, ident, prog = None, None, ""
        for atom, instance, _, atom_body, atom_stop in _children(doc, body, stop, budget):
            if atom == RT_EXOLEOBJ_ATOM and atom_stop - atom_body >= 24:
                _, kind, ident = struct.unpack_from("<III", doc, atom_body)
            elif atom == RT_CSTRING and instance == 2:
                prog = bytes(doc[atom_body:atom_stop]).decode("utf_16_le", "replace")
        if ident is not None and kind == 0:
            embeds[ident] = prog
    return embeds


# ---------------------------------------------------------------------------------------------------------------
# the OOXML results
# ---------------------------------------------------------------------------------------------------------------

SEP = "}"
NS_W = "http://schemas.openxmlformats.org/wordprocessingml/2006/main"
NS_A = "http://schemas.openxmlformats.org/drawingml/2006/main"
NS_P = "http://schemas.openxmlformats.org/presentationml/2006/main"
NS_P188 = "http://schemas.microsoft.com/office/powerpoint/2018/8/main"  # modern comments
NS_S = "http://schemas.openxmlformats.org/spreadsheetml/2006/main"
NS_R = "http://schemas.openxmlformats.org/officeDocument/2006/relationships"
NS_PR = "http://schemas.openxmlformats.org/package/2006/relationships"
NS_V = "urn:schemas-microsoft-com:vml"
NS_O = "urn:schemas-microsoft-com:office:office"
NS_MC = "http://schemas.openxmlformats.org/markup-compatibility/2006"
NS_M = "http://schemas.openxmlformats.org/officeDocument/2006/math"
IMAGE_RELATIONSHIP = "http://schemas.openxmlformats.org/officeDocument/2006/relationships/image"
W_TEXT = {f"{NS_W}{SEP}t", f"{NS_W}{SEP}delText"}
W_CHARACTERS = {f"{NS_W}{SEP}softHyphen": "\u00ad", f"{NS_W}{SEP}noBreakHyphen": "\u2011"}
A_TEXT = f"{NS_A}{SEP}t"
# elements whose pictures are the rendering of something else: OLE objects, controls, alternative content
NOT_PICTURES = {f"{NS_W}{SEP}object", f"{NS_W}{SEP}control", f"{NS_P}{SEP}oleObj", f"{NS_P}{SEP}control",
                f"{NS_S}{SEP}objectPr", f"{NS_S}{SEP}controlPr", f"{NS_MC}{SEP}Fallback"}
PICTURE_REFERENCES = {f"{NS_A}{SEP}blip": (f"{NS_R}{SEP}embed",),
                      f"{NS_V}{SEP}imagedata": (f"{NS_R}{SEP}id", f"{NS_O}{SEP}relid"),
                      f"{NS_V}{SEP}fill": (f"{NS_R}{SEP}id", f"{NS_O}{SEP}relid")}
MATH = {f"{NS_M}{SEP}oMath", f"{NS_M}{SEP}oMathPara"}
HEADER_FOOTER_CONTENT = {f"{NS_W}{SEP}drawing", f"{NS_W}{SEP}pict", f"{NS_W}{SEP}object",
                         f"{NS_W}{SEP}fldSimple"}
# a cell as LibreOffice writes it: <c r="B1" s="3" t="n"><f ...>formula</f><v>value</v></c>, or an inline string
SHEET_CELL = re.compile(rb'<c r="([A-Z]{1,3}[0-9]{1,7})"(?: s="[0-9]+")?(?: t="([a-zA-Z]+)")?>'
                        rb'(<f[^>]*/>|<f[^>]*>[^<]*</f>)?(?:<v>([^<]*)</v>|<v/>|<is>(.*?)</is>)?</c>', re.S)
INLINE_TEXT = re.compile(rb"<t(?:\s[^>]*)?>([^<]*)</t>")
PHONETIC = re.compile(rb"<rPh\b.*?</rPh>", re.S)
SHARED_STRING = re.compile(rb"<si>(.*?)</si>|<si/>", re.S)
HEADER_FOOTER = re.compile(rb"<odd(Header|Footer)>([^<]*)</odd(?:Header|Footer)>")
DEFAULT_NAMESPACE = re.compile(rb"<(worksheet|sst)\s[^>]*xmlns=\"" + re.escape(NS_S.encode()) + rb"\"")
ESCAPED_CHARACTER = re.compile(r"_x([0-9A-Fa-f]{4})_")


class _Package:
    """A zip package read with bounds: members streamed, never past the size they declare nor ``MAX_PART``."""

    def __init__(self, zip_file):
        self.zip = zip_file
        self.names = {info.filename: info for info in zip_file.infolist()}

    def chunks(self, name):
        info = self.names.get(name)
        if info is None:
            raise _Unreadable(f"{name} is missing")
        if info.file_size > MAX_PART:
            raise _Unreadable(f"{name} is too large")
        read = 0
        with self.zip.open(info) as part:
            while chunk := part.read(CHUNK):
                read += len(chunk)
                if read > info.file_size:
                    raise _Unreadable(f"{name} inflates past its declared size")
                yield chunk

    def parse(self, name, start=None, end=None, text=None):
        """Stream ``name`` through expat, namespaces resolved (``uri}local``); no DTDs."""
        ooxml.stream(self.chunks(name), name, start, end, text, unreadable=_Unreadable)

    def relationships(self, name):
        """{Id: (type, target part name or None when external)} of part ``name``."""
        folder, base = posixpath.split(name)
        rels_name = posixpath.join(folder, "_rels", base + ".rels")
        found = {}
        if rels_name not in self.names:
            return found

        def start(tag, attributes):
            if tag == f"{NS_PR}{SEP}Relationship":
                target = attributes.get("Target", "")
                if attributes.get("TargetMode") == "External":
                    resolved = None
                elif target.startswith("/"):
                    resolved = posixpath.normpath(target)[1:]
                else:
                    resolved = posixpath.normpath(posixpath.join("/" + folder, target))[1:]
                found[attributes.get("Id")] = (attributes.get("Type", ""), resolved)

        self.parse(rels_name, start)
        return found

    def matching(self, pattern):
        return sorted(name for name in self.names if re.fullmatch(pattern, name))


@dataclass
class _Part:
    """What one content part of the result holds."""
    text: Counter = field(default_factory=Counter)
    pictures: set = field(default_factory=set)      # relationship ids
    math: int = 0
    content: bool = False                            # anything shown (headers and footers)
    placeholders: set = field(default_factory=set)  # PresentationML placeholder types
    note_text: bool = False                          # text in a body placeholder or a free shape (notes)
    elements: Counter = field(default_factory=Counter)


def _scan(package, name, text_tags=(), count=()):
    """One pass over a content part: its text (``text_tags``), pictures outside OLE objects and fallbacks,
    equations, placeholders, and how many of the elements ``count`` it holds."""
    part = _Part()
    state = {"text": 0, "hidden": 0, "math": 0, "sp": None}
    text_tags = set(text_tags)
    count = set(count)
    sp_tag, ph_tag = f"{NS_P}{SEP}sp", f"{NS_P}{SEP}ph"

    def start(tag, attributes):
        if tag in text_tags:
            state["text"] += 1
        elif tag in W_CHARACTERS:
            part.text[W_CHARACTERS[tag]] += 1
            part.content = True
        elif tag == f"{NS_W}{SEP}sym":
            try:
                part.text[chr(int(attributes.get(f"{NS_W}{SEP}char", ""), 16))] += 1
            except ValueError:
                pass
        if tag in NOT_PICTURES:
            state["hidden"] += 1
        elif tag in PICTURE_REFERENCES and not state["hidden"]:
            for attribute in PICTURE_REFERENCES[tag]:
                if attributes.get(attribute):
                    part.pictures.add(attributes[attribute])
        if tag in MATH:
            if not state["math"]:
                part.math += 1
            state["math"] += 1
        if tag in HEADER_FOOTER_CONTENT:
            part.content = True
        if tag in count:
            part.elements[tag] += 1
        if tag == sp_tag:
            state["sp"] = [None, []]
        elif tag == ph_tag:
            kind = attributes.get("type", "body")
            part.placeholders.add(kind)
            if state["sp"] is not None:
                state["sp"][0] = kind

    def end(tag):
        if tag in text_tags:
            state["text"] -= 1
        elif tag in NOT_PICTURES:
            state["hidden"] -= 1
        elif tag in MATH:
            state["math"] -= 1
        elif tag == sp_tag and state["sp"] is not None:
            kind, texts = state["sp"]
            if kind == "body" and "".join("".join(texts).split()):
                part.note_text = True
            state["sp"] = None

    def text(data):
        if state["text"]:
            chars = "".join(data.split())
            if chars:
                part.text.update(chars)
                part.content = True
                if state["sp"] is not None:
                    state["sp"][1].append(chars)

    package.parse(name, start, end, text)
    return part


def _pictures_of(package, name, part):
    """The media parts that ``part`` (content part ``name``) shows as pictures."""
    if not part.pictures:
        return set()
    relationships = package.relationships(name)
    found = set()
    for rid in part.pictures:
        rel_type, target = relationships.get(rid, ("", None))
        if target and rel_type == IMAGE_RELATIONSHIP and target in package.names:
            found.add(target)
    return found


def of_result(path, kind):
    """The :class:`Inventory` of the OOXML result ``path`` of a legacy ``kind`` ("doc", "xls" or "ppt"), read from
    its parts as streams. Never raises: what cannot be read is None (unknown)."""
    inventory = Inventory(kind, dict.fromkeys(KINDS[kind]))
    try:
        with zipfile.ZipFile(path) as zip_file:
            package = _Package(zip_file)
            {"doc": _docx, "xls": _xlsx, "ppt": _pptx}[kind](package, inventory)
    except Exception:  # not a zip, or a reader missed a case: what it had not counted stays unknown
        pass
    _count_macros(path, inventory, lambda _: _has_vba_part(path))
    return inventory


def _has_vba_part(path):
    """Does the package hold a vbaProject.bin (read from its directory only)? True when that cannot be told."""
    try:
        with zipfile.ZipFile(path) as zip_file:
            return any(name.lower().endswith("vbaproject.bin") for name in zip_file.namelist())
    except Exception:
        return True


def _charts_and_objects(package, folder):
    """(charts, embedded objects) of the package: chart parts, and embeddings no chart refers to."""
    charts = package.matching(rf"{folder}/charts/chart[0-9]*\.xml")
    data = set()
    for chart in charts:
        data |= {target for _, target in package.relationships(chart).values() if target}
    objects = [name for name in package.matching(rf"{folder}/embeddings/[^/]+") if name not in data]
    return len(charts), len(objects)


def _docx(package, inventory):
    """Counts of a .docx/.docm: the main document, headers and footers, notes and comments parts."""
    counts = inventory.counts
    try:
        charts, objects = _charts_and_objects(package, "word")
        objects += charts  # a .doc has no charts of its own: a chart part was an MS Graph object
    except Exception:
        objects = None
    pictures, headers, comments, math = set(), 0, 0, 0
    main = "word/document.xml"
    try:
        part = _scan(package, main, W_TEXT)
        inventory.text = part.text
        counts["characters"] = part.text.total()
        pictures |= _pictures_of(package, main, part)
        math = part.math
        counts["embedded_objects"] = None if objects is None else objects + math
        others = package.matching(r"word/(header|footer)[0-9]*\.xml")
        for name in others:
            sub = _scan(package, name, W_TEXT)
            headers += sub.content
            pictures |= _pictures_of(package, name, sub)
        counts["headers_footers"] = headers
        for name in package.matching(r"word/(footnotes|endnotes|comments)\.xml"):
            sub = _scan(package, name, (), count=(f"{NS_W}{SEP}comment",))
            comments += sub.elements[f"{NS_W}{SEP}comment"]
            pictures |= _pictures_of(package, name, sub)
        counts["comments"] = comments
        counts["images"] = len(pictures)
    except Exception:
        pass


def _pptx(package, inventory):
    """Counts of a .pptx/.pptm: the slide list, slides, their notes and comments, masters and layouts."""
    counts = inventory.counts
    objects = _attempt(lambda: sum(_charts_and_objects(package, "ppt")))  # charts: MS Graph objects, as in .docx
    main = "ppt/presentation.xml"
    slide_ids = []

    def slide(tag, attributes):
        if tag == f"{NS_P}{SEP}sldId":
            slide_ids.append(attributes.get(f"{NS_R}{SEP}id"))

    package.parse(main, slide)
    relationships = package.relationships(main)
    slides = [relationships[rid][1] for rid in slide_ids
              if rid in relationships and relationships[rid][1] in package.names]
    counts["slides"] = len(slides)
    text, pictures, placeholders, notes, comments, math = Counter(), set(), set(), 0, 0, 0
    cm = (f"{NS_P}{SEP}cm", f"{NS_P188}{SEP}cm")
    for name in slides:
        part = _scan(package, name, (A_TEXT,))
        text.update(part.text)
        math += part.math
        pictures |= _pictures_of(package, name, part)
        placeholders |= part.placeholders
        for rel_type, target in package.relationships(name).values():
            if target and target in package.names and rel_type.endswith("/notesSlide"):
                notes_part = _scan(package, target, (A_TEXT,))
                notes += notes_part.note_text
                pictures |= _pictures_of(package, target, notes_part)
            elif target and target in package.names and rel_type.endswith("/comments"):
                comments += sum(_scan(package, target, count=cm).elements.values())
    inventory.text = text
    counts["characters"] = text.total()
    counts["notes"] = notes
    counts["comments"] = comments
    counts["headers_footers"] = len(placeholders & {"dt", "sldNum", "ftr"})
    counts["embedded_objects"] = None if objects is None else objects + math
    for name in package.matching(r"ppt/(slideMasters/slideMaster|slideLayouts/slideLayout)[0-9]*\.xml"):
        part = _scan(package, name)
        pictures |= _pictures_of(package, name, part)
    counts["images"] = len(pictures)


# --- .xlsx -------------------------------------------------------------------------------------------------------

def _xlsx(package, inventory):
    """Counts of an .xlsx/.xlsm: the workbook, shared strings, sheets, their drawings and comments."""
    counts = inventory.counts
    charts_objects = _attempt(_charts_and_objects, package, "xl")
    if charts_objects:
        counts["charts"], counts["embedded_objects"] = charts_objects
    main = "xl/workbook.xml"
    sheets, flags = [], {}

    def start(tag, attributes):
        if tag == f"{NS_S}{SEP}sheet":
            sheets.append((attributes.get("name", ""), attributes.get(f"{NS_R}{SEP}id")))
        elif tag == f"{NS_S}{SEP}workbookPr":
            flags["date1904"] = attributes.get("date1904", "false").lower() in ("1", "true")

    package.parse(main, start)
    inventory.date1904 = flags.get("date1904", False)
    inventory.sheets = [name for name, _ in sheets]
    counts["sheets"] = len(sheets)
    relationships = package.relationships(main)
    strings = _attempt(_shared_strings, package, relationships)
    cells, pictures, headers_at, comments_at = {}, set(), [], []
    readable = strings is not None
    for name, rid in sheets:
        target = relationships.get(rid, ("", None))[1]
        if not target or target not in package.names:
            continue
        try:
            found, formulas, headers = _sheet(package, target, strings or [])
        except Exception:
            readable = False
            continue
        cells[name], inventory.formulas[name] = found, formulas
        headers_at += [_place(name, which) for which in headers]
        for rel_type, part in package.relationships(target).values():
            if part and part in package.names and rel_type.endswith("/drawing"):
                pictures |= _pictures_of(package, part, _scan(package, part))
            elif part and part in package.names and rel_type.endswith("/comments"):
                comments_at += [_place(name, ref) for ref in _comment_refs(package, part)]
    counts["images"] = len(pictures)
    counts["comments"] = len(comments_at)
    inventory.where["comments"] = comments_at
    if readable:  # a sheet that could not be read leaves its cells and headers unknown
        inventory.cells = cells
        counts["cells"] = sum(len(found) for found in cells.values())
        counts["headers_footers"] = len(headers_at)
        inventory.where["headers_footers"] = headers_at


def _comment_refs(package, name):
    """The cell references of the comments in a comments part."""
    refs = []

    def start(tag, attributes):
        if tag == f"{NS_S}{SEP}comment":
            refs.append(attributes.get("ref", "?"))

    package.parse(name, start)
    return refs


def _unescape(raw):
    """The text of XML character data: entities and the _xHHHH_ escapes of OOXML resolved."""
    text = raw.decode("utf-8", "replace")
    if "&" in text:
        text = html.unescape(text)
    if "_x" in text:
        text = ESCAPED_CHARACTER.sub(lambda m: chr(int(m.group(1), 16)), text)
    return text


def _shared_strings(package, relationships):
    """The shared strings of the workbook, in order (rich text runs joined, phonetic runs left out)."""
    names = [target for rel_type, target in relationships.values()
             if target and rel_type.endswith("/sharedStrings") and target in package.names]
    if not names:
        return []
    strings = []
    head, tail = None, b""
    for chunk in package.chunks(names[0]):
        data = tail + chunk
        if head is None:
            head = data[:4096]
            if not DEFAULT_NAMESPACE.search(head):
                return _shared_strings_expat(package, names[0])
        last = max(data.rfind(b"</si>") + 5, data.rfind(b"<si/>") + 5, 0)
        for match in SHARED_STRING.finditer(data, 0, last):
            strings.append(_string_item(match.group(1) or b""))
        tail = data[last:]
    if not tail.rstrip().endswith(b"</sst>"):
        raise _Unreadable(f"{names[0]} ends early")
    return strings


def _string_item(content):
    """The text of an ``<si>`` or ``<is>`` element's content."""
    if b"<rPh" in content:
        content = PHONETIC.sub(b"", content)
    return "".join(_unescape(text) for text in INLINE_TEXT.findall(content))


def _shared_strings_expat(package, name):
    """The shared strings read by expat: for a part in another layout than LibreOffice's."""
    strings, state = [], {"in": 0, "phonetic": 0}
    si, t, rph = f"{NS_S}{SEP}si", f"{NS_S}{SEP}t", f"{NS_S}{SEP}rPh"

    def start(tag, _):
        if tag == si:
            strings.append([])
        elif tag == t:
            state["in"] += 1
        elif tag == rph:
            state["phonetic"] += 1

    def end(tag):
        if tag == t:
            state["in"] -= 1
        elif tag == rph:
            state["phonetic"] -= 1

    def text(data):
        if state["in"] and not state["phonetic"] and strings:
            strings[-1].append(data)

    package.parse(name, start, end, text)
    return [ESCAPED_CHARACTER.sub(lambda m: chr(int(m.group(1), 16)), "".join(parts)) for parts in strings]


def _cell_value(kind, raw, strings):
    """The value of a result cell from its ``t`` and the text of its ``<v>``, or None when it has none."""
    if kind == b"s":
        index = int(raw)
        return strings[index] if 0 <= index < len(strings) else None
    if kind in (b"str", b"inlineStr"):
        return _unescape(raw)
    if kind == b"b":
        return raw.strip() in (b"1", b"true")
    if kind == b"e":
        return ErrorValue(_unescape(raw))
    if kind == b"d":
        return _unescape(raw)
    return float(raw)


def _sheet(package, name, strings):
    """({ref: value}, {refs with a formula}, non-empty odd headers and footers) of one worksheet part."""
    cells, formulas = {}, set()
    head, tail, matched, closed = None, b"", 0, 0
    for chunk in package.chunks(name):
        data = tail + chunk
        if head is None:
            head = data[:4096]
            if not DEFAULT_NAMESPACE.search(head):
                return _sheet_expat(package, name, strings)
        last = data.rfind(b"</c>")
        if last < 0:
            tail = data if len(data) < CHUNK else data[-(CHUNK // 4):]
            continue
        last += 4
        closed += data.count(b"</c>", 0, last)
        found = SHEET_CELL.findall(data, 0, last)
        matched += len(found)
        for ref, kind, formula, raw, inline in found:
            try:
                if not kind or kind == b"n":
                    if not raw:
                        continue
                    value = float(raw)
                elif kind == b"s":
                    index = int(raw)
                    if index < 0:
                        continue
                    value = strings[index]
                elif kind == b"inlineStr":
                    value = _string_item(inline)
                else:
                    value = _cell_value(kind, raw, strings)
            except (ValueError, IndexError):
                continue
            cells[ref] = value
            if formula:
                formulas.add(ref)
        tail = data[last:]
    if matched != closed:  # a cell the expression did not take: read the part properly
        return _sheet_expat(package, name, strings)
    if not tail.rstrip().endswith(b"</worksheet>"):
        raise _Unreadable(f"{name} ends early")
    headers = [which.decode().lower() for which, text in HEADER_FOOTER.findall(tail) if text.strip()]
    return cells, formulas, headers


def _sheet_expat(package, name, strings):
    """What ``_sheet`` reads, by expat: for a part in another layout than LibreOffice's."""
    cells, formulas, state = {}, set(), {"ref": None, "t": b"n", "v": None, "f": False, "in": None,
                                         "inline": [], "headers": [], "hf": None}
    c, v, f, t, is_ = (f"{NS_S}{SEP}{local}" for local in ("c", "v", "f", "t", "is"))
    hf_tags = {f"{NS_S}{SEP}oddHeader", f"{NS_S}{SEP}oddFooter"}

    def start(tag, attributes):
        if tag == c:
            state.update(ref=attributes.get("r", "").encode(), t=attributes.get("t", "n").encode(), v=None,
                         f=False, inline=[])
        elif tag == v:
            state["in"], state["v"] = "v", []
        elif tag == f:
            state["f"] = True
        elif tag == t and state["ref"] is not None:
            state["in"] = "t"
        elif tag in hf_tags:
            state["hf"] = []

    def end(tag):
        if tag == c:
            value = None
            try:
                if state["t"] == b"inlineStr":
                    value = "".join(state["inline"])
                elif state["v"] is not None:
                    raw = "".join(state["v"])
                    if state["t"] in (b"str", b"e", b"d"):
                        value = raw if state["t"] != b"e" else ErrorValue(raw)
                    else:
                        value = _cell_value(state["t"], raw.encode(), strings)
            except ValueError:
                value = None
            if value is not None and state["ref"]:
                cells[state["ref"]] = value
                if state["f"]:
                    formulas.add(state["ref"])
            state["ref"] = None
        elif tag in (v, t):
            state["in"] = None
        elif tag in hf_tags:
            if "".join(state["hf"]).strip():
                state["headers"].append(tag.rpartition("odd")[2].lower())
            state["hf"] = None
        elif tag == is_:
            state["in"] = None

    def text(data):
        if state["in"] == "v":
            state["v"].append(data)
        elif state["in"] == "t":
            state["inline"].append(data)
        elif state["hf"] is not None:
            state["hf"].append(data)

    package.parse(name, start, end, text)
    return cells, formulas, state["headers"]


# ---------------------------------------------------------------------------------------------------------------
# the report
# ---------------------------------------------------------------------------------------------------------------

def same_value(source, result):
    """Is the result cell's value the source's: numbers within RELATIVE_TOLERANCE, the rest exactly and of the same
    type (text, boolean, error)."""
    if isinstance(source, float):
        return isinstance(result, float) and (source == result or math.isclose(source, result,
                                                                                 rel_tol=RELATIVE_TOLERANCE))
    if isinstance(source, bool):
        return isinstance(result, bool) and source == result
    return type(source) is type(result) and source == result


def _compare_cells(source, result):
    """(equal cells, {category: [count, first place]}) over the source's cells."""
    shift = 0.0
    if source.date1904 != result.date1904:
        shift = 1462.0 if source.date1904 else -1462.0  # the same day counted from 1904 / from 1900
    equal, problems = 0, {}

    def note(category, sheet, ref):
        entry = problems.setdefault(category, [0, f"sheet '{sheet}' {ref.decode()}"])
        entry[0] += 1

    for sheet, cells in source.cells.items():
        target = sheet[:SHEET_NAME_LIMIT]  # the name the result gives the sheet
        found = result.cells.get(target, {})
        formulas = result.formulas.get(target, set())
        for ref, value in cells.items():
            other = found.get(ref)
            if other == value and other.__class__ is value.__class__:  # most cells: no need to look closer
                equal += 1
                continue
            if shift and isinstance(value, StoredDate):
                value = value + shift
            if other is not None and same_value(value, other):
                equal += 1
            elif other is None:
                note("missing", sheet, ref)
            elif ref in formulas:
                note("formula", sheet, ref)
            else:
                note("value", sheet, ref)
    return equal, problems


CELL_DETAILS = {"formula": ("{n} formula result differs from the source; first: {first}",
                            "{n} formula results differ from the source; first: {first}"),
                "value": ("{n} cell value differs from the source; first: {first}",
                          "{n} cell values differ from the source; first: {first}"),
                "missing": ("{n} cell of the source is missing; first: {first}",
                            "{n} cells of the source are missing; first: {first}")}


def report(source, result, macros_removed=False, loaded=None):
    """The fidelity report of ``result`` (an :class:`Inventory` from ``of_result``) against ``source`` (from
    ``of_source``): ``{"complete": bool, "counts": {what: {"source": n, "result": n}}, "lost": [{"what", "count",
    "detail"}]}``.

    ``counts`` has every kind of ``KINDS`` for the file type, 0 included; ``null`` is a count that could not be
    read. For ``cells``, ``characters`` and ``macros`` the result figure is how many of the source's are in the
    result (equal cells, characters found, modules with the same code); for the others it is the result's own count,
    and a loss is a result count below the source's. An unknown source count is not compared (it never makes a
    loss); an unknown result count is a loss when the source holds something.

    Characters may miss up to ``TEXT_TOLERANCE_CHARACTERS`` + ``TEXT_TOLERANCE_RATIO`` of the source's without a
    loss (fields LibreOffice computes at load: dates, page and slide numbers).

    ``macros_removed``: the VBA project was removed on request. That is what was asked for, not a loss of the
    conversion: the modules are listed in ``lost`` with the detail "removed on request", and ``complete`` stays
    true when nothing else is missing.

    ``loaded``: counts of parts LibreOffice loaded (the bridge's ``parts``: embedded objects, charts). A result
    holding fewer is a loss too, where the comparison with the source did not already name one.
    """
    counts, lost = {}, []
    blocking = False
    for what in KINDS[source.kind]:
        have, got = source.counts.get(what), result.counts.get(what)
        entries = []
        if what == "cells":
            got, entries = _cells_report(source, result, have, got)
        elif what == "characters":
            got, entries = _text_report(source, result, have, got)
        elif what == "macros":
            got, entries, removed = _macros_report(source, result, have, got, macros_removed)
            if removed:
                lost.append(removed)
        elif what == "sheets":
            entries = _sheets_report(source, result, have, got)
        elif have and got is None:
            entries = [{"what": what, "count": have, "detail": f"the {LABELS[what]} could not be read in the result"}]
        elif have is not None and got is not None and got < have:
            missing = have - got
            verb = "is" if missing == 1 else "are"
            entries = [{"what": what, "count": missing,
                        "detail": f"{missing} of {have} {LABELS[what]} {verb} missing"
                                  f"{_places(source.where.get(what), result.where.get(what))}"}]
        if not entries and what in (loaded or {}):
            entries = _loaded_report(what, loaded[what], got)
        counts[what] = {"source": have, "result": got}
        lost += entries
        blocking = blocking or bool(entries)
    return {"complete": not blocking, "counts": counts, "lost": lost}


def _loaded_report(what, loaded, got):
    """A part LibreOffice loaded and its export dropped, where the source's own count did not show it (unreadable,
    or LibreOffice found more than the legacy file's records name)."""
    if loaded is None or got is None or got >= loaded:
        return []
    missing = loaded - got
    return [{"what": what, "count": missing,
             "detail": f"LibreOffice loaded {loaded} {LABELS[what]}; the result holds {got}"}]


def _place(sheet, where):
    """A place in a workbook as the report names it: "sheet 'Name' B1"."""
    return f"sheet '{sheet[:SHEET_NAME_LIMIT]}' {where}"


def _places(source, result):
    """Where the missing ones were ("; first: sheet 'a' B1, sheet 'b' C2") when both sides say where theirs are."""
    if not source or result is None:
        return ""
    missing = list((Counter(source) - Counter(result)).elements())
    more = f" and {len(missing) - 3} more" if len(missing) > 3 else ""
    return f"; missing: {', '.join(missing[:3])}{more}" if missing else ""


def _sheets_report(source, result, have, got):
    """The lost entries of the sheets: names of the source missing in the result."""
    if have is None:
        return []
    if got is None or result.sheets is None:
        return [{"what": "sheets", "count": have, "detail": "the sheets could not be read in the result"}] \
            if have else []
    missing = Counter(name[:SHEET_NAME_LIMIT] for name in source.sheets or []) - Counter(result.sheets)
    if not missing:
        return []
    names = ", ".join(f"'{name}'" for name in list(missing.elements())[:5])
    count = missing.total()
    return [{"what": "sheets", "count": count,
             "detail": f"{count} of {have} sheets {'is' if count == 1 else 'are'} missing: {names}"}]


def _cells_report(source, result, have, got):
    """(equal cells, lost entries) of the cells."""
    if have is None or source.cells is None:
        return None, []
    if result.cells is None:
        return None, ([{"what": "cells", "count": have, "detail": "the cells could not be read in the result"}]
                      if have else [])
    equal, problems = _compare_cells(source, result)
    entries = [{"what": "cells", "count": problems[category][0],
                "detail": CELL_DETAILS[category][problems[category][0] != 1].format(
                    n=problems[category][0], first=problems[category][1])}
               for category in ("formula", "value", "missing") if category in problems]
    return equal, entries


def _text_report(source, result, have, got):
    """(characters found, lost entries) of the text."""
    if have is None or source.text is None:
        return None, []
    if result.text is None:
        return None, ([{"what": "characters", "count": have,
                        "detail": "the text could not be read in the result"}] if have else [])
    theirs = _fold(result.text) if FOLDED in source.text else result.text
    missing = source.text - theirs
    count = missing.total()
    found = have - count
    allowed = TEXT_TOLERANCE_CHARACTERS + int(TEXT_TOLERANCE_RATIO * have)
    if count <= allowed:
        return found, []
    sample = "".join(char for char, _ in missing.most_common(10))
    return found, [{"what": "characters", "count": count,
                    "detail": f"{count} of {have} characters of the text are missing (more than the {allowed} "
                              f"allowed for fields computed at load); most missing: {sample!r}"}]


def normal_code(code):
    """VBA code as compared: its lines without line-end and trailing-space differences, and without ``Attribute``
    lines (module and procedure metadata: LibreOffice's project drops procedure descriptions, shortcut keys and
    control declarations, the code stays the same)."""
    lines = code.replace("\r\n", "\n").replace("\r", "\n").split("\n")
    return [line.rstrip() for line in lines if line.strip() and not line.startswith("Attribute ")]


def _macros_report(source, result, have, got, removed_on_request):
    """(modules kept, blocking losses, the "removed on request" entry or None)."""
    if have is None or source.macros is None:
        return got, [], None
    if removed_on_request:
        entry = {"what": "macros", "count": have,
                 "detail": f"{have} VBA module{'s' if have != 1 else ''} removed on request"} if have else None
        return got, [], entry
    if result.macros is None:
        return None, ([{"what": "macros", "count": have, "detail": "the VBA modules could not be read in the result"}]
                      if have else [])
    missing = [name for name in source.macros if name not in result.macros]
    changed = [name for name in source.macros if name in result.macros
               and normal_code(source.macros[name]) != normal_code(result.macros[name])]
    entries = []
    if missing:
        entries.append({"what": "macros", "count": len(missing),
                        "detail": f"{len(missing)} of {have} VBA modules are missing: {', '.join(missing[:10])}"})
    if changed:
        names = ", ".join(changed[:10])
        entries.append({"what": "macros", "count": len(changed),
                        "detail": f"the code of {len(changed)} of {have} VBA modules differs: {names}"})
    return have - len(missing) - len(changed), entries, None
