"""An .xls's counts from its Workbook stream's BIFF records (the scan skips cell records: xlrd reads the cells)."""

import math
import struct
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import olefile

from docshift.engine.inventory import officeart, sheet_controls, xls_views
from docshift.engine.inventory.common import (
    SHEET_NAME_LIMIT,
    Budget,
    ErrorValue,
    Inventory,
    Link,
    StoredDate,
    Unreadable,
    attempt,
    biff_string,
    code_page,
    embedded_objects,
    header_shows,
    place,
    stream,
)

BIFF_BOF = {0x0809, 0x0409, 0x0209, 0x0009}
BIFF_EOF, BIFF_CONTINUE, BIFF_BOUNDSHEET, BIFF_CODEPAGE = 0x000A, 0x003C, 0x0085, 0x0042
BIFF_NOTE, BIFF_HEADER, BIFF_FOOTER, BIFF_IMDATA = 0x001C, 0x0014, 0x0015, 0x007F  # IMDATA: a picture's bitmap
# a custom view's settings of a sheet, its page setup's header and footer among them: alternatives to the sheet's
BIFF_USER_VIEW_BEGIN, BIFF_USER_VIEW_END = 0x01AA, 0x01AB
BIFF_DRAWING_GROUP, BIFF_DRAWING, BIFF_FILEPASS, BIFF_OBJ, BIFF_TXO = 0x00EB, 0x00EC, 0x002F, 0x005D, 0x01B6
BIFF_NAME, BIFF_SUPBOOK, BIFF_EXTERNSHEET = 0x0018, 0x01AE, 0x0017
DT_GLOBALS, DT_WORKSHEET, DT_CHART, DT_MACRO_SHEET = 0x0005, 0x0010, 0x0020, 0x0040
# NUMBER, RK, MULRK, LABELSST, LABEL, FORMULA, STRING, BOOLERR, BLANK, MULBLANK, ROW, DBCELL
BIFF_CELLS = frozenset({0x0203, 0x027E, 0x00BD, 0x00FD, 0x0204, 0x0006, 0x0207, 0x0205, 0x0201, 0x00BE, 0x0208,
                        0x00D7})
SHEET_TYPES = {0: "worksheet", 1: "macro sheet", 2: "chart"}  # BOUNDSHEET.dt; 6 (VBA module) is no sheet
XL_ERRORS = {0x00: "#NULL!", 0x07: "#DIV/0!", 0x0F: "#VALUE!", 0x17: "#REF!", 0x1D: "#NAME?", 0x24: "#NUM!",
             0x2A: "#N/A", 0x2B: "#GETTING_DATA"}
# a cell's stored NaN or infinity (other programs write them; Excel holds none) is the error Excel gives it, as the
# result holds it (``stored.not_numbers``); a cell's text past Excel's limit is what Excel and LibreOffice keep of it
NOT_A_NUMBER = ErrorValue("#NUM!")
FT_CMO, OT_NOTE = b"\x15\x00", 0x19  # an OBJ record's first subrecord (its common data: the object type), a note
# the object types of drawing shapes ([MS-XLS] FtCmo.ot): a group, line, rectangle, oval, arc, text box, polygon, and
# Office Art object (a shape as Excel 2007 and later write one into an .xls)
DRAWN, OT_LINE = {0x00, 0x01, 0x02, 0x03, 0x04, 0x06, 0x09, 0x1E}, 0x01
CLICKABLE = DRAWN | {0x05, 0x08}  # and charts and pictures: what a click may run a macro of
LINES = {20, *range(32, 41)}  # the shape types (MSOSPT) of a line and the connectors: one may have no height
MAX_CELL_TEXT = 32_767


@dataclass
class _Workbook:
    """What one pass over the BIFF records of a Workbook stream finds."""
    sheets: list[str] = field(default_factory=list)  # names of the sheets in BOUNDSHEET order
    macro_sheets: list[str] = field(default_factory=list)  # where each sheet of Excel 4.0 macros is (BOUNDSHEET.dt 1)
    chart_sheets: list[str] = field(default_factory=list)  # the names of the chart sheets (BOUNDSHEET.dt 2)
    charts: int = 0
    notes: int = 0
    bitmaps: list[bytearray] = field(default_factory=list)  # each IMDATA record of the worksheets, CONTINUEs and all
    headers: list[str] = field(default_factory=list)  # sheet names of each non-empty header/footer
    comments_at: list[str] = field(default_factory=list)
    group: bytearray = field(default_factory=bytearray)    # MSODRAWINGGROUP and its CONTINUEs
    drawings: list[bytearray] = field(default_factory=list)  # one bytearray of MSODRAWING data per worksheet
    objects: list[list[bytes]] = field(default_factory=list)  # the OBJ records of each, in order
    drawing_sheets: list[str] = field(default_factory=list)  # the BOUNDSHEET name of each
    chart_owners: list[tuple[int, int]] = field(default_factory=list)  # (sheet, OBJ) of each chart in a worksheet
    note_objects: set[tuple[int, int]] = field(default_factory=set)  # (sheet, OBJ id) of each NOTE's box (BIFF8)
    texts: dict[tuple[int, int], str] = field(default_factory=dict)  # (sheet, OBJ) of a TXO's object: its text
    names: list[str] = field(default_factory=list)  # the defined names (Lbl records, BIFF8), in order
    supbooks: list[bool] = field(default_factory=list)  # each SUPBOOK: whether it is this workbook's own
    references: list[int] = field(default_factory=list)  # the SUPBOOK of each XTI of the EXTERNSHEET
    calculation: dict[str, str] = field(default_factory=dict)  # calcPr's attributes, as the first sheet gives them
    very_hidden: list[str] = field(default_factory=list)  # the sheets Excel's menus do not show, to be unhidden
    sharing: dict[str, str] = field(default_factory=dict)  # fileSharing's attributes, of a FILESHARING record
    settings: xls_views.Settings = field(default_factory=xls_views.Settings)  # each sheet's printing, formats...
    encrypted: bool = False
    globals: bool = False                           # BIFF2-4 files hold one sheet and no workbook globals


def _biff(data: bytes, budget: Budget) -> _Workbook:
    """One pass over the BIFF records of the Workbook stream (bounded by the budget)."""
    book = _Workbook()
    stack: list[int] = []
    biff8, codepage, last, drawing = True, "cp1252", None, None
    mode, text_left, runs_left = None, 0, 0
    in_view = False
    if len(data) < 8 or struct.unpack_from("<H", data, 0)[0] not in BIFF_BOF:
        raise Unreadable("the Workbook stream does not start with a BOF record")
    pos, size, substream = 0, len(data), -1
    every_sheet: list[str] = []
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
            in_view = False
            if not stack:
                if dt == DT_GLOBALS or dt == 0x0100:
                    biff8 = rec_type == 0x0809 and version == 0x0600
                    book.globals, book.settings.biff8 = True, biff8
                else:
                    substream += 1  # the sheets follow the globals in BOUNDSHEET order
                    drawing = bytearray()
                    book.drawings.append(drawing)
                    book.objects.append([])
                    book.drawing_sheets.append(every_sheet[substream] if substream < len(every_sheet) else "?")
            if dt == DT_CHART:
                book.charts += 1
                if stack and stack[-1] in (DT_WORKSHEET, DT_MACRO_SHEET) and book.objects and book.objects[-1]:
                    book.chart_owners.append((len(book.objects) - 1, len(book.objects[-1]) - 1))  # its OBJ's
            stack.append(dt)
        elif rec_type == BIFF_EOF:
            if stack:
                stack.pop()
        elif top == DT_GLOBALS or (top == 0x0100):
            if rec_type in xls_views.WORKBOOK_RECORDS:  # a SUPBOOK is read below too
                book.settings.workbook_record(rec_type, bytes(data[body:end]))
            if rec_type == BIFF_BOUNDSHEET and length >= 8:
                name = biff_string(data, body + 6, end, biff8, codepage)  # ShortXLUnicodeString
                every_sheet.append(name)
                if data[body + 5] in SHEET_TYPES:
                    book.sheets.append(name)
                    book.macro_sheets += [f"sheet '{name[:SHEET_NAME_LIMIT]}'"] if data[body + 5] == 1 else []
                    book.chart_sheets += [name] if data[body + 5] == 2 else []
                    if data[body + 4] & 0x03 == xls_views.VERY_HIDDEN:
                        book.very_hidden.append(name)
            elif rec_type == xls_views.BIFF_FILESHARING and biff8:
                book.sharing = xls_views.sharing(data[body:end], biff_string(data, body + 4, end, True, codepage, 2))
            elif rec_type == BIFF_CODEPAGE and length >= 2:
                codepage = code_page(struct.unpack_from("<H", data, body)[0])
            elif rec_type == BIFF_FILEPASS:
                book.encrypted = True
            elif rec_type == BIFF_NAME and length >= 15 and biff8:  # Lbl: its name's length at 3, the name at 14
                count, wide = data[body + 3], data[body + 14] & 1
                label = bytes(data[body + 15:min(end, body + 15 + count * (2 if wide else 1))])
                book.names.append(label.decode("utf_16_le" if wide else "latin-1", "replace"))
            elif rec_type == BIFF_SUPBOOK and length >= 4:
                book.supbooks.append(data[body + 2:body + 4] == b"\x01\x04")  # 0x0401: this workbook's own
            elif rec_type == BIFF_EXTERNSHEET and length >= 2 and biff8:
                count = min(struct.unpack_from("<H", data, body)[0], (length - 2) // 6)
                book.references = [struct.unpack_from("<H", data, body + 2 + 6 * index)[0] for index in range(count)]
            elif rec_type == BIFF_DRAWING_GROUP or (rec_type == BIFF_CONTINUE and last == BIFF_DRAWING_GROUP):
                book.group += data[body:end]
        elif top in (DT_WORKSHEET, DT_MACRO_SHEET) and len(stack) == 1:
            name = every_sheet[substream] if 0 <= substream < len(every_sheet) else "?"
            if rec_type in (xls_views.BIFF_CALCMODE, xls_views.BIFF_REFMODE):
                xls_views.calculation(rec_type, data, body, length, book.calculation)
            elif rec_type in xls_views.SHEET_RECORDS and not in_view:  # a custom view has a SETUP of its own
                xls_views.sheet_record(rec_type, data[body:end], name, book.settings)
            elif rec_type == BIFF_NOTE and length >= 6:
                row, column = struct.unpack_from("<HH", data, body)
                if biff8 or row != 0xFFFF:  # BIFF5 continues long notes in NOTE records of row 0xFFFF
                    book.notes += 1
                    cell = ((COLUMNS[column] if column < len(COLUMNS) else b"?") + b"%d" % (row + 1)).decode()
                    book.comments_at.append(place(name, cell))
                    if biff8 and length >= 8:  # its box's OBJ, and its author (stAuthor)
                        book.note_objects.add((len(book.objects) - 1, struct.unpack_from("<H", data, body + 6)[0]))
                        book.settings.authors.setdefault(name, {})[cell] = biff_string(data, body + 8, end, True, "", 2)
            elif rec_type == BIFF_IMDATA:
                book.bitmaps.append(bytearray(data[body:end]))
            elif rec_type == BIFF_CONTINUE and last == BIFF_IMDATA and book.bitmaps:
                book.bitmaps[-1] += data[body:end]
            elif rec_type in (BIFF_USER_VIEW_BEGIN, BIFF_USER_VIEW_END):
                in_view = rec_type == BIFF_USER_VIEW_BEGIN
            elif rec_type in (BIFF_HEADER, BIFF_FOOTER) and length and not in_view and \
                    header_shows(biff_string(data, body, end, biff8, codepage, count_bytes=2)):
                book.headers.append(place(name, "header" if rec_type == BIFF_HEADER else "footer"))
            # drawing data: MSODRAWING records, and CONTINUE records after them, after OBJ records and after
            # a TXO's own CONTINUE records (its text and formatting runs)
            if rec_type == BIFF_DRAWING and drawing is not None:
                drawing += data[body:end]
                mode = "drawing"
            elif rec_type == BIFF_OBJ:
                book.objects[-1].append(bytes(data[body:end]))
                mode = "drawing"
            elif rec_type == BIFF_TXO and length >= 14:
                text_left, runs_left = struct.unpack_from("<HH", data, body + 10)
                mode = "txo"
            elif rec_type == BIFF_CONTINUE and mode == "txo" and (text_left or runs_left):
                if text_left and length:
                    wide = data[body] & 1
                    if book.objects and book.objects[-1]:  # the text of the object the TXO follows
                        key = (len(book.objects) - 1, len(book.objects[-1]) - 1)
                        text = bytes(data[body + 1:end]).decode("utf_16_le" if wide else "latin-1", "replace")
                        book.texts[key] = book.texts.get(key, "") + text[:text_left]
                    text_left = max(0, text_left - (length - 1) // (2 if wide else 1))
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


def read(ole: olefile.OleFileIO, inventory: Inventory, budget: Budget, path: str | Path) -> None:
    """Counts of an .xls: one pass over the BIFF records, its MBD storages, xlrd for the cells."""
    counts = inventory.counts
    name = "Workbook" if ole.exists("Workbook") else "Book"
    data = stream(ole, name)
    if data is None:
        return
    book = _biff(data, budget)
    if book.encrypted:
        return
    if book.globals:
        inventory.sheets, counts["sheets"] = book.sheets, len(book.sheets)
        inventory.where["macro_sheets"], counts["macro_sheets"] = book.macro_sheets, len(book.macro_sheets)
    counts["comments"] = book.notes
    inventory.calculation = {key: value for key, value in book.calculation.items()
                             if value != {"calcMode": "auto", "refMode": "A1"}[key]}
    inventory.very_hidden, inventory.sharing, inventory.chart_sheets = book.very_hidden, book.sharing, book.chart_sheets
    book.settings.into(inventory)
    inventory.where["comments"] = book.comments_at
    counts["headers_footers"] = len(book.headers)
    inventory.where["headers_footers"] = book.headers
    counts["charts"] = book.charts
    counts["embedded_objects"] = attempt(embedded_objects, ole, None, "MBD")
    inventory.where["controls"] = [f"sheet '{book.drawing_sheets[index][:SHEET_NAME_LIMIT]}'"
                                   for index, records in enumerate(book.objects) if index < len(book.drawing_sheets)
                                   for record in records if sheet_controls.is_control(record)]
    counts["controls"] = len(inventory.where["controls"])
    # a shape's click that runs a macro: counted where the workbook has the VBA project the macro would be in
    scripted = ole.get_type("_VBA_PROJECT_CUR/VBA") == olefile.STGTY_STORAGE
    try:
        bstore = officeart.bstore(book.group, 0, len(book.group), budget) if book.group else []
        found: set[Any] = set()
        unshown = 0
        drawn: list[str] = []  # the drawing shapes of each sheet
        acting: list[str] = []  # those of them that run a macro
        for index, drawing in enumerate(book.drawings):
            shapes = officeart.shapes(drawing, 0, len(drawing), budget)
            found |= officeart.pictures([shape for shape in shapes if _shown(shape)], bstore)
            owned = _owned(book, index, shapes)
            unshown += sum(1 for sheet, obj in book.chart_owners
                           if sheet == index and obj < len(owned) and not _shown(owned[obj][0]))
            # a note whose box has no height or width: LibreOffice drops it; a copy with a box goes to it
            inventory.unsized_notes += [shape.anchor for shape, (kind, ident) in owned if kind == OT_NOTE
                                        and (index, ident) in book.note_objects and not _shown(shape)]
            sheet = book.drawing_sheets[index][:SHEET_NAME_LIMIT] if index < len(book.drawing_sheets) else "?"
            shown = [(shape, kind, record) for (shape, (kind, _)), record in zip(owned, book.objects[index])
                     if kind in CLICKABLE and (_sized(shape) if kind == OT_LINE or shape.kind in LINES
                                               else _shown(shape))]
            drawn += [f"sheet '{sheet}'" for shape, kind, _ in shown if kind in DRAWN and not shape.pibs]
            acting += [f"sheet '{sheet}'" for _, _, record in shown if scripted and sheet_controls.runs_macro(record)]
        counts["images"] = len(found) + len({bytes(bitmap) for bitmap in book.bitmaps})  # as the result keeps them
        counts["shapes"], inventory.where["shapes"] = len(drawn), drawn
        counts["actions"], inventory.where["actions"], inventory.macro_actions = len(acting), acting, list(acting)
        counts["charts"] = book.charts - unshown
    except Exception:
        pass
    _cells(data, inventory)


def _sized(shape: officeart.Shape) -> bool:
    """Whether a line's cell anchor gives it a height or a width (it may have one of them only): one of neither shows
    nothing, and LibreOffice leaves it out. A shape in a group is placed in the group's own space."""
    if len(shape.anchor) < 18:
        return True
    left, dx_left, top, dy_top, right, dx_right, bottom, dy_bottom = struct.unpack_from("<8H", shape.anchor, 2)
    return (bottom, dy_bottom) != (top, dy_top) or (right, dx_right) != (left, dx_left)


def _shown(shape: officeart.Shape) -> bool:
    """Whether a shape's cell anchor (OfficeArtClientAnchorSheet) gives it a height and a width: Excel shows no
    object whose bottom edge is not below its top or whose right edge is not right of its left, and LibreOffice
    leaves such a chart or picture out of the result. A shape with no cell anchor (in a group) is shown."""
    if len(shape.anchor) < 18:
        return True
    left, dx_left, top, dy_top, right, dx_right, bottom, dy_bottom = struct.unpack_from("<8H", shape.anchor, 2)
    return (bottom, dy_bottom) > (top, dy_top) and (right, dx_right) > (left, dx_left)


def _owned(book: _Workbook, index: int,
           shapes: list[officeart.Shape]) -> list[tuple[officeart.Shape, tuple[int, int]]]:
    """(shape, (object type, object id) of its OBJ record) of each shape of sheet ``index`` that has an OBJ record:
    each shape with client data has one, in order. Where the two do not pair up, which is which cannot be told."""
    owned = [shape for shape in shapes if shape.client]
    records = book.objects[index]
    if len(owned) != len(records):
        return []
    return [(shape, struct.unpack_from("<HH", record, 4) if len(record) >= 8 and record[:2] == FT_CMO else (-1, -1))
            for shape, record in zip(owned, records, strict=True)]


class _Discard:
    """xlrd's log, not kept."""
    def write(self, _: str) -> None:
        pass


def _column_names(limit: int) -> list[bytes]:
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


def _cells(workbook: bytes, inventory: Inventory, named: str | None = None) -> None:
    """xlrd's cells with a stored value, by sheet name: {b"B1": float | StoredDate | str | bool | ErrorValue}.
    xlrd is given the Workbook stream that ``stream`` read, never the file: its own compound file reader follows a
    sector chain that loops for ever (a fuzzed workbook grew the worker to 8 GB), and reads the file a second time.
    ``named``: the name of a file's one sheet that names none (an Excel 4.0 worksheet's)."""
    import xlrd
    try:
        try:
            book = xlrd.open_workbook(file_contents=workbook, logfile=_Discard(), ragged_rows=True)
            windows = book.biff_version < 80 and book.codepage in (None, 1200)
        except UnicodeDecodeError:  # 8-bit strings read as BIFF8's UTF-16, which an Excel 95 file may declare
            windows = True
        if windows:  # before BIFF8 a string's bytes are in the CODEPAGE record's code page; without one (or with
            # UTF-16's) Excel in the West and LibreOffice take Windows-1252 (xlrd Latin-1: 0x80-0x9F differ)
            book = xlrd.open_workbook(file_contents=workbook, logfile=_Discard(), ragged_rows=True,
                                      encoding_override="cp1252")
    except Exception:  # encrypted, damaged, not BIFF: the cells are unknown
        return
    try:
        if named is not None and book.nsheets == 1:
            book.sheets()[0].name = named
        cells: dict[str, dict[bytes, Any]] = {}
        total = 0
        for sheet in book.sheets():
            found = cells.setdefault(sheet.name, {})
            for row in range(sheet.nrows):
                label = b"%d" % (row + 1)
                for column, (ctype, value) in enumerate(zip(sheet.row_types(row), sheet.row_values(row))):
                    if ctype == 2:
                        number = float(value)
                        found[COLUMNS[column] + label] = number if math.isfinite(number) else NOT_A_NUMBER
                    elif ctype == 1:
                        if value:
                            found[COLUMNS[column] + label] = value[:MAX_CELL_TEXT]
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
        xls_views.read(book.sheets(), inventory)
        _links(book, inventory)
    except Exception:
        pass
    finally:
        book.release_resources()


def _links(book: Any, inventory: Inventory) -> None:
    """The hyperlinks of each sheet's cells (the report's ``hyperlinks``), as xlrd read their HLINK records."""
    for sheet in book.sheets():
        found = inventory.links.setdefault(sheet.name, [])
        for link in sheet.hyperlink_list:
            target = (link.url_or_path or "") if link.type in ("url", "unc", "local file") else ""
            if isinstance(target, bytes):  # a file's ANSI path: xlrd leaves it undecoded where no Unicode one follows
                target = target.decode("cp1252", "replace")
            found.append(Link((link.frowx, link.lrowx), (link.fcolx, link.lcolx), target.rstrip("\0"),
                              (link.textmark or "").rstrip("\0"), (link.desc or "").rstrip("\0"),
                              (link.quicktip or "").rstrip("\0")))
    inventory.where["hyperlinks"] = [f"sheet '{name[:SHEET_NAME_LIMIT]}'" for name, links in inventory.links.items()
                                     for _ in links]
    inventory.counts["hyperlinks"] = len(inventory.where["hyperlinks"])
