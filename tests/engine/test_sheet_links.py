"""A workbook's hyperlinks on cells that show no text, which LibreOffice drops (its links live in a cell's text):
the report counts a sheet's links (``hyperlinks``), and docshift puts each lost one back as Excel writes it
(``sheet_links``)."""

import re
import struct
import zipfile

import openpyxl
import workbooks
from conftest import _soffice_save as soffice
from openpyxl.worksheet.hyperlink import Hyperlink
from workbooks import converted_whole, rewritten, saved_as_xls, with_workbook_stream

from docshift.engine import inventory, sheet_links
from docshift.engine.inventory.common import Link

HLINK, BOUNDSHEET = 0x01B8, 0x0085


def with_links_on_empty_cells(workbook):
    """The Workbook stream with each HLINK record followed by a copy of it on cells that hold nothing: the first on
    C5, the next on D7:E8, as Excel keeps a link on any cell; the offsets of the sheets after them move."""
    records, pos = [], 0
    while pos < len(workbook):
        size = struct.unpack_from("<H", workbook, pos + 2)[0]
        records.append(bytearray(workbook[pos:pos + 4 + size]))
        pos += 4 + size
    out, moved, end = [], [], 0  # moved: (where in the stream as it was, bytes added there)
    places = iter([(4, 4, 2, 2), (6, 7, 3, 4)])
    for record in records:
        out.append(record)
        end += len(record)
        if struct.unpack_from("<H", record)[0] == HLINK:
            copy = bytearray(record)
            struct.pack_into("<HHHH", copy, 4, *next(places))
            out.append(copy)
            moved.append((end, len(copy)))
    for record in out:
        if struct.unpack_from("<H", record)[0] == BOUNDSHEET:
            offset = struct.unpack_from("<I", record, 4)[0]
            struct.pack_into("<I", record, 4, offset + sum(size for at, size in moved if at <= offset))
    return b"".join(out)


def workbook_with_links(tmp_path):
    """A workbook with a web link on A1 and a link to a place of its own on A2, made here as an .xlsx and saved as
    an .xls by LibreOffice, then each link copied onto cells that hold nothing."""
    book = openpyxl.Workbook()
    sheet = book.active
    sheet["A1"], sheet["A2"] = "Docs", "Totals"
    sheet["A1"].hyperlink = "https://example.org/docs"
    sheet["A2"].hyperlink = Hyperlink(ref="A2", location="'Totals'!B2")
    book.create_sheet("Totals")["B2"] = 42
    book.save(tmp_path / "links.xlsx")
    legacy = soffice(tmp_path / "links.xlsx", "xls", tmp_path / "legacy")
    return with_workbook_stream(legacy, with_links_on_empty_cells, tmp_path / "links.xls")


def links_of(path):
    """{cell: (target, location)} of the first sheet's hyperlinks, as openpyxl reads them."""
    sheet = openpyxl.load_workbook(path).worksheets[0]
    return {cell.hyperlink.ref: (cell.hyperlink.target, cell.hyperlink.location)
            for row in sheet.iter_rows() for cell in row if cell.hyperlink is not None}


def test_links_on_cells_that_show_no_text_come_back_as_excel_writes_them(office, tmp_path):
    source = workbook_with_links(tmp_path)
    held = inventory.of_source(source, "xls")
    assert held.counts["hyperlinks"] == 4 and held.where["hyperlinks"] == ["sheet 'Sheet'"] * 4
    assert [link[:3] for link in held.links["Sheet"]] == [
        ((0, 0), (0, 0), "https://example.org/docs"), ((4, 4), (2, 2), "https://example.org/docs"),
        ((1, 1), (0, 0), ""), ((6, 7), (3, 4), "")]
    plain = soffice(source, "xlsx", tmp_path / "plain")
    assert set(links_of(plain)) == {"A1", "A2"}  # LibreOffice's import drops the links on empty cells
    assert inventory.report(held, inventory.of_result(plain, "xls"))["counts"]["hyperlinks"] == \
        {"source": 4, "result": 2}

    converted = converted_whole(office, source, tmp_path / "work", "hyperlinks", 4)
    found = links_of(converted.path)  # openpyxl gives each cell of a range its link
    assert found["C5"] == ("https://example.org/docs", None)
    assert found["D7"][1] == found["E8"][1] == "'Totals'!B2" and set(found) >= {"A1", "A2", "C5", "D7", "E8"}
    with zipfile.ZipFile(converted.path) as package:
        rels = package.read("xl/worksheets/_rels/sheet1.xml.rels").decode()
        assert b'ref="D7:E8" location="\'Totals\'!B2" display="Totals"/>' in \
            package.read("xl/worksheets/sheet1.xml")
    assert 'Target="https://example.org/docs" TargetMode="External"' in rels


def test_only_links_whose_cells_meet_none_of_the_result_s_go_in(tmp_path):
    sheet = (b'<worksheet xmlns="http://schemas.openxmlformats.org/spreadsheetml/2006/main"><sheetData/>'
             b'<hyperlinks><hyperlink ref="B2:C3" location="A1"/></hyperlinks><pageMargins/></worksheet>')
    book = openpyxl.Workbook()
    book.save(tmp_path / "base.xlsx")
    with zipfile.ZipFile(tmp_path / "base.xlsx") as package:
        parts = {name: package.read(name) for name in package.namelist()}
    parts["xl/worksheets/sheet1.xml"] = sheet
    with zipfile.ZipFile(tmp_path / "book.xlsx", "w") as package:
        for name, data in parts.items():
            package.writestr(name, data)
    links = [Link((2, 2), (2, 2), "", "Elsewhere!A1", "", ""),  # C3: in the result's B2:C3
             Link((9, 9), (0, 0), "https://example.org/a?b=1&c=2", "", "A & B", "a tip")]
    assert sheet_links.mend(tmp_path / "book.xlsx", "xls", {"Sheet": links}) == 1
    with zipfile.ZipFile(tmp_path / "book.xlsx") as package:
        data = package.read("xl/worksheets/sheet1.xml").decode()
        rels = package.read("xl/worksheets/_rels/sheet1.xml.rels").decode()
    assert 'ref="A10" r:id="rId1" tooltip="a tip" display="A &amp; B"/></hyperlinks><pageMargins/>' in data
    assert 'Target="https://example.org/a?b=1&amp;c=2" TargetMode="External"' in rels
    assert sheet_links.mend(tmp_path / "book.xlsx", "xls", {"Sheet": links}) == 0  # nothing is lacking now


def test_a_result_that_does_not_read_is_left_as_it_is(tmp_path, caplog):
    broken = tmp_path / "broken.xlsx"
    broken.write_bytes(b"PK\x03\x04 not a package")
    links = [Link((0, 0), (0, 0), "https://example.org/", "", "", "")]
    assert sheet_links.mend(broken, "xls", {"Sheet": links}) == 0
    assert broken.read_bytes() == b"PK\x03\x04 not a package"
    assert "the hyperlinks of" in caplog.text


def file_link(row, column, path):
    """An HLINK record ([MS-XLS] 2.4.140) on one cell to the file ``path`` by its ANSI path alone: a file moniker
    with no Unicode path after it ([MS-OSHARED] 2.3.7.8), as Excel 97 wrote one."""
    moniker = (bytes.fromhex("0303000000000000c000000000000046") + struct.pack("<HI", 0, len(path) + 1)
               + path.encode("cp1252") + b"\0" + struct.pack("<HH", 0xFFFF, 0xDEAD) + bytes(20) + struct.pack("<I", 0))
    body = (struct.pack("<4H", row, row, column, column) + bytes.fromhex("d0c9ea79f9bace118c8200aa004ba90b")
            + struct.pack("<II", 2, 0x03) + moniker)
    return struct.pack("<HH", HLINK, len(body)) + body


def test_a_link_to_a_file_by_its_ansi_path_is_read_and_the_views_with_it(office, tmp_path):
    """A workbook that opens on its second sheet, whose first holds a link to ``c:\\docs\\plan.txt`` that xlrd reads
    as bytes: the report counts the link, with its path, and the result opens on the second sheet. The link's bytes
    made the inventory stop before it read the sheets' views, and LibreOffice opens a workbook on its first sheet.
    The link's target is the file's absolute path, which LibreOffice writes relative to the folder it converted in."""
    book = openpyxl.Workbook()
    book.active["A1"] = "linked"
    second = book.create_sheet("Second")
    second["A1"] = "shown"
    book.active = 1
    made = saved_as_xls(book, tmp_path, "views")
    source = with_workbook_stream(made, lambda stream: rewritten(
        stream, lambda rec_type, body, index: file_link(0, 0, "c:\\docs\\plan.txt") + workbooks.record(0x000A, body)
        if rec_type == 0x000A and index == 1 else None), tmp_path / "linked.xls")
    found = inventory.of_source(source, "xls")
    assert [link.target for link in found.links["Sheet"]] == ["c:\\docs\\plan.txt"]
    assert found.views["Second"].shown and not found.views["Sheet"].selected
    result = converted_whole(office, source, tmp_path / "work", "hyperlinks", 1).path
    with zipfile.ZipFile(result) as package:
        assert 'activeTab="1"' in package.read("xl/workbook.xml").decode()
        # the path stays absolute (``drive_paths``), where a plain soffice makes it relative to its own folder
        assert 'Target="file:///c:/docs/plan.txt"' in package.read("xl/worksheets/_rels/sheet1.xml.rels").decode()
    with zipfile.ZipFile(soffice(source, "xlsx", tmp_path / "plain")) as package:
        plain = package.read("xl/worksheets/_rels/sheet1.xml.rels").decode()
    assert re.search(r'Target="(\.\./)+c:/docs/plan.txt"', plain)
