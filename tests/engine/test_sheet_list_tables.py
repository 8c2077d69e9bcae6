"""An .xls's tables ("Format as Table", FEAT11 and LIST12 records), which LibreOffice drops, written into the .xlsx
(``docshift/engine/sheet_list_tables.py``)."""

import re
import struct
import zipfile

import openpyxl
from conftest import ROOT
from conftest import _soffice_save as soffice
from workbooks import record, rewritten, saved_as_xls, with_workbook_stream

from docshift.engine import convert, sheet_list_tables

DASHBOARD = ROOT.parent / "shared" / "corpus" / "xls" / "46137.xls"  # a table on its dashboard sheet, C46:L61
EOF = 0x000A


def table_parts(result):
    """{table part: its XML} of the workbook ``result``."""
    with zipfile.ZipFile(result) as package:
        return {name: package.read(name).decode() for name in package.namelist() if name.startswith("xl/tables/")}


def feat11(list_id, name, rows, columns, totals=False):
    """A FEAT11 record of a table ``name`` over ``rows`` and ``columns`` (first, last; 0-based) with a header row,
    an autofilter and, where ``totals``, a total row ([MS-XLS] 2.4.138, 2.5.266; its columns' data left out)."""
    ref = struct.pack("<4H", rows[0], rows[1], columns[0], columns[1])
    table = struct.pack("<6I4H", 0, list_id, 1, int(totals), columns[1] - columns[0] + 2, 64, 0, 0, 0x0006, 0)
    table += bytes(32) + struct.pack("<HB", len(name), 0) + name.encode() + struct.pack("<H", 0)
    return record(0x0872, struct.pack("<HH", 0x0872, 1) + ref + struct.pack("<HBIHIH", 5, 0, 0, 1, 0, 0) + ref
                  + table)


def list12_style(list_id, style, flags):
    """A LIST12 record giving the table ``list_id`` the table style ``style`` and the style's ``flags``."""
    return record(0x0877, struct.pack("<HH", 0x0877, 0) + bytes(8) + struct.pack("<HIH", 1, list_id, flags)
                  + struct.pack("<HB", len(style), 0) + style.encode())


def test_a_dashboard_s_table_is_written_as_excel_writes_one(office, tmp_path):
    """``46137.xls``'s dashboard has a table, ``Table1`` over C46:L61, in Excel's TableStyleLight8, with filter
    buttons: a plain soffice writes no table; docshift's result has it, its columns named by its header row, and
    LibreOffice reads it back as a range of that name with filter buttons."""
    assert sheet_list_tables.tables(DASHBOARD)["EntityDistributionDashboard"][0].box == (45, 60, 2, 11)
    assert not table_parts(soffice(DASHBOARD, "xlsx", tmp_path / "plain"))
    result = convert.convert(office, DASHBOARD, "xls", tmp_path / "work", 60).path
    [part] = table_parts(result).values()
    assert 'name="Table1"' in part and 'ref="C46:L61"' in part and '<autoFilter ref="C46:L61"/>' in part
    assert '<tableStyleInfo name="TableStyleLight8"' in part and 'showRowStripes="1"' in part
    sheet = openpyxl.load_workbook(result)["EntityDistributionDashboard"]
    table = sheet.tables["Table1"]
    assert [column.name for column in table.tableColumns] == [sheet.cell(46, column).value for column in range(3, 13)]
    back = soffice(result, "ods", tmp_path / "back")
    with zipfile.ZipFile(back) as package:
        ranges = re.findall(r'<table:database-range [^>]*>', package.read("content.xml").decode())
    assert any('table:name="Table1"' in found and "C46" in found and "display-filter-buttons" in found
               for found in ranges)


def test_tables_that_excel_would_refuse_stay_out(office, tmp_path):
    """Four tables of one sheet, made here: a table with a line break in a header and a total row goes in (the break
    as Excel writes it in a column's name, ``_x000A_``); a table whose header row has a blank cell, one over a merged
    range and one named like a cell stay out."""
    book = openpyxl.Workbook()
    sheet = book.active
    for row in range(1, 6):
        for column in range(1, 12):
            sheet.cell(row, column, f"r{row}c{column}" if row > 1 else f"Head {column}")
    sheet.cell(1, 2).value = "Two\nlines"
    sheet.cell(1, 5).value = None  # the second table's header has a blank
    sheet.merge_cells("G3:H3")  # the third table's range meets it
    made = saved_as_xls(book, tmp_path, "tables")
    added = (feat11(1, "Sales", (0, 4), (0, 2), totals=True) + list12_style(1, "TableStyleMedium2", 0x0004)
             + feat11(2, "Blank", (0, 4), (3, 5)) + feat11(3, "Merged", (0, 4), (6, 8))
             + feat11(4, "AB12", (0, 4), (9, 10)))
    source = with_workbook_stream(made, lambda stream: rewritten(
        stream, lambda rec_type, body, index: added + record(EOF, body) if rec_type == EOF and index == 1 else None),
        tmp_path / "listed.xls")
    assert [table.name for table in sheet_list_tables.tables(source)["Sheet"]] == ["Sales", "Blank", "Merged", "AB12"]
    result = convert.convert(office, source, "xls", tmp_path / "work", 60).path
    [part] = table_parts(result).values()
    assert 'name="Sales"' in part and 'ref="A1:C5"' in part and 'totalsRowCount="1"' in part
    assert '<autoFilter ref="A1:C4"/>' in part and '<tableColumn id="2" name="Two_x000A_lines"/>' in part
    assert '<tableStyleInfo name="TableStyleMedium2"' in part
    table = openpyxl.load_workbook(result)["Sheet"].tables["Sales"]
    assert [column.name for column in table.tableColumns] == ["Head 1", "Two\nlines", "Head 3"]
