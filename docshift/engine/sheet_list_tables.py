"""An .xls's tables (Excel's "Format as Table", its list objects), which LibreOffice drops, written into the .xlsx.

Excel 2007 and later keep a table of a workbook saved as .xls in a FEAT11 record of its sheet ([MS-XLS] 2.4.138, a
feature of type ISFLIST holding a TableFeatureType, 2.5.266: its range, whether it has a header row and a total row
and an autofilter, its name) and LIST12 records after it (2.4.157): its table style and which of the style's stripes
and columns it shows (lsd 1, List12TableStyleClientInfo). Excel 97-2003 ignores them; Excel 2007 and later open the
table again. LibreOffice 25.2's import reads neither, and a plain ``soffice`` writes the cells alone: a table whose
style Excel did not copy into its cells' formats (``r-cran-readxl``'s ``deaths.xls``) comes out with no banding and
no header style, and no table keeps its filter buttons, its name or its growth as rows are added. Of 787 workbooks
of the corpus, POI's tests and unseen sets 25-31, 4 have tables: 12.

``mend`` writes each table as Excel writes one (ECMA-376 Part 1, 18.5): ``xl/tables/tableN.xml`` related from its
sheet (``tableParts``), with its range, name, header and total rows, autofilter and style; its columns are named by
its header row's cells as the result holds them, which is what Excel requires of them. A table is left out where a
header cell holds no text, or the text of another, where its range meets a merged range, the sheet's autofilter or
another table, where its name is not a name Excel allows or is a defined name's, and where it is not a range of the
sheet's own or of a query (a SharePoint list, an XML map) or has no header row. A workbook whose result has tables
already is left as it is. Every other byte stays as LibreOffice wrote it, but for the sheets' relationships and the
content types.
"""

import itertools
import re
import struct
import zipfile
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from docshift.engine import biff, ooxml, sheet_objects
from docshift.engine.embedding import MAX_EDITED_PART, free_name, guarded
from docshift.engine.inventory import xlsx
from docshift.engine.inventory.common import biff_string
from docshift.engine.inventory.package import NS_R, NS_S, Package
from docshift.engine.sheet_links import Box, box_of, meet
from docshift.engine.sheet_objects import cell_name

BIFF_FEAT11, BIFF_LIST12, BIFF_TABLESTYLES = 0x0872, 0x0877, 0x088E
ISF_LIST = 5  # a FEAT11's feature type: a table
RANGE, EXTERNAL_DATA = 0, 3  # a TableFeatureType's source (lt): a range of the sheet, a query's
SINGLE_CELL = 0x0200  # a TableFeatureType's flags: fSingleCell (an XML map's cell)
AUTO_FILTER = 0x0002  # and fAutoFilter
STYLE_INFO = 1  # a LIST12's lsd: List12TableStyleClientInfo
FIRST_COLUMN, LAST_COLUMN, ROW_STRIPES, COLUMN_STRIPES, DEFAULT_STYLE = 0x01, 0x02, 0x04, 0x08, 0x40
BUILT_IN_STYLE = re.compile(r"TableStyle(?:Light(?:[1-9]|1[0-9]|2[01])|Medium(?:[1-9]|1[0-9]|2[0-8])"
                            r"|Dark(?:[1-9]|1[01]))")  # Excel's own styles: another must be in the styles part
EXCEL_DEFAULT_STYLE = "TableStyleMedium9"  # a workbook's default table style where it names none
# a table's name: a letter, an underscore or a backslash first, then those, digits and periods; not a cell's name
NAME = re.compile(r"[^\W\d][\w.\\]*|\\[\w.\\]*")
CELL_LIKE = re.compile(r"[A-Za-z]{1,3}[0-9]+|[RrCc]|[Rr][0-9]*[Cc][0-9]*")
NOT_XML = re.compile("[\ud800-\udfff\ufffe\uffff]")
CONTROL, ESCAPE_LIKE = re.compile("[\x00-\x1f]"), re.compile("_(?=x[0-9A-Fa-f]{4}_)")
TABLE_RELATIONSHIP = f"{ooxml.RELATIONSHIPS}/table"
TABLE_TYPE = "application/vnd.openxmlformats-officedocument.spreadsheetml.table+xml"
AFTER_TABLE_PARTS = re.compile(rb"<(?:[A-Za-z_][\w.-]*:)?extLst[\s/>]|</(?:[A-Za-z_][\w.-]*:)?worksheet>")
MERGE_OR_FILTER = re.compile(rb'<(?:mergeCell|autoFilter)\b[^>]*?\bref="([A-Z]+)([0-9]+)(?::([A-Z]+)([0-9]+))?"')
DEFINED_NAME = re.compile(rb'<definedName\b[^>]*?\bname="([^"]*)"')


@dataclass
class Table:
    """A table of an .xls sheet: its name, its cells (its header row first, its total row last where it has one),
    whether it has a total row and an autofilter, and its style (None: its LIST12 names none; "": no style) with the
    LIST12's flags."""
    name: str
    box: Box
    totals: bool
    filtered: bool
    style: str | None = None
    shows: int = ROW_STRIPES


def mend(result: Path, source: Path, kind: str) -> int:
    """Write each table of the .xls ``source`` into ``result`` (LibreOffice's export of it). Returns how many went
    in (0: the file is untouched). Never raises for what the files hold."""
    if kind != "xls":
        return 0
    return guarded(lambda result, source: _written(result, tables(source)), result, source,
                   "the tables of %s stay out of the result: %r")


def tables(source: Path) -> dict[str, list[Table]]:
    """{sheet name (its first 31 characters): its tables} of the .xls ``source`` (BIFF8)."""
    found: dict[str, list[Table]] = {}
    by_list: dict[tuple[str, int], Table] = {}
    default = EXCEL_DEFAULT_STYLE
    for rec_type, sheet, data, body, end in biff.records(source, {BIFF_FEAT11, BIFF_LIST12, BIFF_TABLESTYLES}):
        if rec_type == BIFF_TABLESTYLES and sheet is None and end - body >= 20:
            (count,) = struct.unpack_from("<H", data, body + 16)
            named = bytes(data[body + 20:min(end, body + 20 + 2 * count)]).decode("utf-16-le", "replace")
            default = named if BUILT_IN_STYLE.fullmatch(named) else default
        elif rec_type == BIFF_FEAT11 and sheet is not None:
            listed = _table(data, body, end)
            if listed is not None:
                found.setdefault(sheet[:31], []).append(listed[1])
                by_list[sheet[:31], listed[0]] = listed[1]
        elif rec_type == BIFF_LIST12 and sheet is not None and end - body >= 20:
            lsd, list_id, flags = struct.unpack_from("<HIH", data, body + 12)
            table = by_list.get((sheet[:31], list_id))
            if lsd == STYLE_INFO and table is not None:
                table.style = biff_string(data, body + 20, end, True, "cp1252", 2)
                table.shows = flags
    for table in (table for listed in found.values() for table in listed):
        if table.style is not None and not table.style and table.shows & DEFAULT_STYLE:
            table.style = default
    return found


def _table(data: bytes, body: int, end: int) -> tuple[int, Table] | None:
    """(its list id, the table) of a FEAT11 record ``data[body:end]``, or None where it is no table of a range or a
    query with a header row."""
    if end - body < 27 or struct.unpack_from("<H", data, body + 12)[0] != ISF_LIST:
        return None
    (refs,) = struct.unpack_from("<H", data, body + 19)
    first, last, left, right = struct.unpack_from("<4H", data, body + (27 if refs else 4))
    at = body + 27 + 8 * refs  # the TableFeatureType
    if at + 66 > end:
        return None
    source_type, list_id, header, totals = struct.unpack_from("<4I", data, at)
    (flags,) = struct.unpack_from("<H", data, at + 28)
    if source_type not in (RANGE, EXTERNAL_DATA) or header != 1 or totals > 1 or flags & SINGLE_CELL:
        return None
    if not first + totals < last or left > right:
        return None
    name = biff_string(data, at + 64, end, True, "cp1252", 2)
    return list_id, Table(name, (first, last, left, right), bool(totals), bool(flags & AUTO_FILTER))


def _written(result: Path, found: dict[str, list[Table]]) -> int:
    """The tables ``found`` written into the workbook ``result``; how many (none where it has tables already)."""
    if not found:
        return 0
    with zipfile.ZipFile(result) as zf:
        package = Package(zf)
        if any(name.startswith("xl/tables/") for name in package.names):
            return 0
        main = ooxml.read(zf, package.names["xl/workbook.xml"], MAX_EDITED_PART)
        strings = xlsx.shared_strings(package, package.relationships("xl/workbook.xml"))
    taken = {ooxml.xstring(name.decode("utf-8", "replace")).lower() for name in DEFINED_NAME.findall(main)}
    numbers = itertools.count(1)
    return sheet_objects.into_sheets(
        result, found, lambda package, part, _, listed, lower, edits, added: _sheet(
            package, part, listed, (taken, strings, numbers), lower, edits, added))


def _sheet(package: Package, part: str, listed: list[Table], book: tuple[set[str], list[str], Iterator[int]],
           lower: set[str], edits: dict[str, bytes], added: dict[str, tuple[bytes, str]]) -> int:
    """The tables ``listed`` of the sheet ``part`` that it can hold written into it; how many. ``book``: the names
    the workbook's tables and defined names have taken, its shared strings, the numbers its next tables take."""
    taken, strings, numbers = book
    data = ooxml.checked(ooxml.read(package.zip, package.names[part], MAX_EDITED_PART), part)
    if re.search(rb"<(?:[A-Za-z_][\w.-]*:)?tableParts\b", data):
        return 0
    boxes = [box_of(match) for match in MERGE_OR_FILTER.finditer(data)]
    cells = xlsx.sheet_of(package, part, strings)[0]
    rels_part, rels = sheet_objects.rels_of(package, part)
    rid = sheet_objects.relationship_ids(rels)
    new_rels: list[tuple[str, ...]] = []
    parts = []
    for table in listed:
        first, _, left, right = table.box
        names = [cells.get(cell_name(first, column).encode()) for column in range(left, right + 1)]
        if not _fits(table, names, boxes, taken):  # a header cell of no text, a number, is no column's name
            continue
        boxes.append(table.box)
        taken.add(table.name.lower())
        name = free_name(lower, "xl/tables/table{}.xml")
        added[name] = (_table_xml(table, next(numbers), [str(text) for text in names]), TABLE_TYPE)
        new_rels.append((rid(), TABLE_RELATIONSHIP, "../tables/" + name.rsplit("/", 1)[1]))
        parts.append(f'<tablePart xmlns:r="{NS_R}" r:id="{new_rels[-1][0]}"/>')
    if not parts:
        return 0
    edits[part] = sheet_objects.insert_before(
        data, AFTER_TABLE_PARTS, f'<tableParts count="{len(parts)}">{"".join(parts)}</tableParts>'.encode())
    sheet_objects.add_relationships(package, rels_part, rels, new_rels, edits, added)
    return len(parts)


def _fits(table: Table, names: list[Any], boxes: list[Box], taken: set[str]) -> bool:
    """Whether ``table`` can go into its sheet: a name Excel allows and nothing else has, header cells of text each
    its own (``names``, the values of the result's header cells), cells no merged range, autofilter or other table
    (``boxes``) meets."""
    if not NAME.fullmatch(table.name) or CELL_LIKE.fullmatch(table.name) or table.name.lower() in taken:
        return False
    if any(not isinstance(text, str) or not text or NOT_XML.search(text) for text in names):
        return False
    if len({text.lower() for text in names}) != len(names):
        return False
    return not any(meet(table.box, box) for box in boxes)


def _table_xml(table: Table, number: int, names: list[str]) -> bytes:
    """The table part of ``table``, the workbook's ``number``th, its columns ``names``."""
    first, last, left, right = table.box
    ref = f"{cell_name(first, left)}:{cell_name(last, right)}"
    rows = ' totalsRowCount="1"' if table.totals else ' totalsRowShown="0"'
    name = ooxml.attribute_value(table.name)
    parts = [f'<table xmlns="{NS_S}" id="{number}" name="{name}" displayName="{name}" ref="{ref}"{rows}>']
    if table.filtered:
        parts.append(f'<autoFilter ref="{cell_name(first, left)}:{cell_name(last - table.totals, right)}"/>')
    parts.append(f'<tableColumns count="{len(names)}">')
    parts += [f'<tableColumn id="{index}" name="{ooxml.attribute_value(_xstring(text))}"/>'
              for index, text in enumerate(names, 1)]
    parts.append("</tableColumns>")
    if table.style is not None:
        style = f' name="{table.style}"' if BUILT_IN_STYLE.fullmatch(table.style) else ""
        flags = " ".join(f'{key}="{int(bool(table.shows & bit))}"' for key, bit in (
            ("showFirstColumn", FIRST_COLUMN), ("showLastColumn", LAST_COLUMN), ("showRowStripes", ROW_STRIPES),
            ("showColumnStripes", COLUMN_STRIPES)))
        parts.append(f"<tableStyleInfo{style} {flags}/>")
    parts.append("</table>")
    return ('<?xml version="1.0" encoding="UTF-8" standalone="yes"?>\n' + "".join(parts)).encode("utf-8")


def _xstring(text: str) -> str:
    """``text`` as an ST_Xstring writes it, as Excel writes a column's name: a control character (a line break in a
    header cell) as ``_xHHHH_``, and a "_" that would begin such an escape as ``_x005F_``."""
    return CONTROL.sub(lambda found: f"_x{ord(found.group()):04X}_", ESCAPE_LIKE.sub("_x005F_", text))
