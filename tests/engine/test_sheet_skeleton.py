"""The mends of what lies around a sheet's cells and a workbook's defined names edit the part without them: the edit
never sees a row or a name, and what it wrote comes back with them, every other byte as it was. A workbook's sheets
are read from its list of sheets, not from the names after it."""

import io
import zipfile

import pytest

from docshift.engine import ooxml, sheet_objects
from docshift.engine.inventory.package import Package
from docshift.engine.sheet_skeleton import without_cells, without_names

S = 'xmlns="http://schemas.openxmlformats.org/spreadsheetml/2006/main"'
ROWS = '<row r="1"><c r="A1" t="s"><v>0</v></c></row><row r="2"><c r="B2"><v>&lt;/sheetData&gt;</v></c></row>'
SHEET = (f'<?xml version="1.0"?><worksheet {S}><sheetPr/><sheetData>{ROWS}</sheetData>'
         '<pageMargins left="0.7" right="0.7" top="0.75" bottom="0.75" header="0.3" footer="0.3"/></worksheet>')
NAMES = ''.join(f'<definedName name="n{i}">Sheet1!$A${i}</definedName>' for i in range(1, 4))
WORKBOOK = (f'<workbook {S} xmlns:r="http://schemas.openxmlformats.org/officeDocument/2006/relationships">'
            '<bookViews><workbookView activeTab="0"/></bookViews><sheets><sheet name="One" sheetId="1" r:id="rId1"/>'
            f'</sheets><definedNames>{NAMES}</definedNames></workbook>')


def margins(data: bytes, name: str) -> tuple[bytes, int]:
    """An edit of the page margins that refuses to see a cell."""
    assert b"<row" not in data and b"<c " not in data
    return ooxml.edit_tags(data, name, lambda tag, _: {"left": "1"} if tag.endswith("pageMargins") else None), 1


def test_an_edit_around_the_cells_sees_none_and_they_come_back_as_they_were():
    edited, count = without_cells(margins)(SHEET.encode(), "xl/worksheets/sheet1.xml")
    assert (edited.decode(), count) == (SHEET.replace('left="0.7"', 'left="1"'), 1)
    untouched = without_cells(lambda data, name: (data, 0))(SHEET.encode(), "sheet")
    assert untouched == (SHEET.encode(), 0)


@pytest.mark.parametrize("sheet", [SHEET.replace(f"<sheetData>{ROWS}</sheetData>", "<sheetData/>"),
                                   SHEET.replace(f"<sheetData>{ROWS}</sheetData>", "<sheetData></sheetData>"),
                                   SHEET])
def test_a_sheet_of_no_cells_or_an_edit_that_takes_the_end_tag_gets_the_whole_part(sheet):
    seen = []
    whole = without_cells(lambda data, name: (seen.append(data) or data.replace(b"sheetData", b"cells"), 1))
    edited, _ = whole(sheet.encode(), "sheet")
    assert seen[-1] == sheet.encode() and edited == sheet.replace("sheetData", "cells").encode()


def test_the_workbook_s_names_are_left_out_of_its_edit():
    def opening(data: bytes, name: str) -> tuple[bytes, int]:
        assert b"<definedName " not in data
        return ooxml.edit_tags(data, name, lambda tag, _: {"activeTab": "2"} if tag.endswith("workbookView")
                               else None), 1

    edited, _ = without_names(opening)(WORKBOOK.encode(), "xl/workbook.xml")
    assert edited.decode() == WORKBOOK.replace('activeTab="0"', 'activeTab="2"')


def test_a_workbook_s_sheets_are_read_from_its_list_alone():
    """What follows the list of sheets is not parsed: here it is not even well-formed."""
    rels = ('<Relationships xmlns="http://schemas.openxmlformats.org/package/2006/relationships"><Relationship '
            'Id="rId1" Type="http://schemas.openxmlformats.org/officeDocument/2006/relationships/worksheet" '
            'Target="worksheets/sheet1.xml"/></Relationships>')
    for workbook, listed in ((WORKBOOK.replace("</definedNames>", "</definedName>"), True), (WORKBOOK, True),
                             (WORKBOOK.replace("</sheets>", ""), False)):
        buffer = io.BytesIO()
        with zipfile.ZipFile(buffer, "w") as package:
            package.writestr("xl/workbook.xml", workbook)
            package.writestr("xl/_rels/workbook.xml.rels", rels)
            package.writestr("xl/worksheets/sheet1.xml", SHEET)
        with zipfile.ZipFile(buffer) as package:
            if listed:
                assert sheet_objects.worksheets(Package(package)) == [(1, "One", "xl/worksheets/sheet1.xml")]
            else:
                with pytest.raises(sheet_objects.Unreadable):
                    sheet_objects.worksheets(Package(package))
