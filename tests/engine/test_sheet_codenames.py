"""The code names that bind a macro workbook's VBA document modules to it and its sheets: LibreOffice's export drops
them, the result gets them back from the .xls, and LibreOffice reads them from it."""

import re
import shutil
import zipfile

import pytest
from conftest import ROOT
from conftest import _soffice_save as soffice

from docshift.contract import Macros
from docshift.engine import convert, sheet_codenames, vba
from docshift.engine.inventory.package import NS_S

CORPUS = ROOT.parent / "shared" / "corpus" / "xls"
CODE_NAME = re.compile(r'config:name="CodeName" config:type="string">([^<]*)<')
# the corpus's macro workbooks: 30070.xls's sheets "Sheet0" and "Sheet1" are modules Sheet1 and Sheet2
WORKBOOKS = {"30070.xls": ("ThisWorkbook", {"Sheet0": "Sheet1", "Sheet1": "Sheet2"}),
             "56450.xls": ("ThisWorkbook", {"Sheet": "Feuil82"})}


def written(result):
    """(the workbook's codeName, [each worksheet's codeName in part order]) of the package ``result``."""
    with zipfile.ZipFile(result) as package:
        workbook = re.search(rb'<workbookPr\b[^>]*\bcodeName="([^"]*)"', package.read("xl/workbook.xml"))
        sheets = sorted(name for name in package.namelist() if re.fullmatch(r"xl/worksheets/sheet[0-9]+\.xml", name))
        found = [re.search(rb'<sheetPr\b[^>]*\bcodeName="([^"]*)"', package.read(name)) for name in sheets]
    return workbook and workbook.group(1).decode(), [match and match.group(1).decode() for match in found]


@pytest.mark.parametrize("name", WORKBOOKS)
def test_the_xls_names_its_workbook_and_sheets_modules(name):
    assert sheet_codenames.codenames(CORPUS / name) == WORKBOOKS[name]


@pytest.mark.parametrize("name", WORKBOOKS)
def test_a_macro_workbook_s_modules_stay_bound_to_its_sheets(office, tmp_path, name):
    """A plain soffice's .xlsm keeps the modules and names none of them; docshift's names each, as the .xls does,
    and LibreOffice reads from it the code names it reads from the .xls."""
    source = tmp_path / name
    shutil.copy(CORPUS / name, source)
    workbook, sheets = WORKBOOKS[name]
    assert written(soffice(source, "xlsm", tmp_path / "plain")) == (None, [None] * len(sheets))
    converted = convert.convert(office, source, "xls", tmp_path / "work", 60)
    assert converted.path.suffix == ".xlsm"
    assert written(converted.path) == (workbook, list(sheets.values()))
    assert {workbook, *sheets.values()} <= set(vba.modules(converted.path))
    legacy = CODE_NAME.findall(soffice(source, "fods", tmp_path / "legacy").read_text())
    assert legacy == [workbook, *sheets.values()]
    assert CODE_NAME.findall(soffice(converted.path, "fods", tmp_path / "read").read_text()) == legacy


def test_without_the_project_no_code_name_goes_in(office, tmp_path):
    """With the macros removed the result is an .xlsx without modules: nothing to bind."""
    converted = convert.convert(office, CORPUS / "30070.xls", "xls", tmp_path / "work", 60, macros=Macros.REMOVE)
    assert converted.path.suffix == ".xlsx" and written(converted.path) == (None, [None, None])


def test_a_code_name_goes_on_the_element_there_is_or_on_one_of_its_own():
    """On ``workbookPr`` or ``sheetPr`` where the part has one (a code name it has stays), else on a new one where
    the schema puts it: before the workbook's views, first in the sheet."""
    workbook = f'<workbook xmlns="{NS_S}"><fileVersion/><bookViews/><sheets/></workbook>'.encode()
    assert sheet_codenames._named(workbook, "workbook.xml", sheet_codenames.WORKBOOK_PR, "Mappe") == workbook.replace(
        b"<bookViews/>", f'<workbookPr xmlns="{NS_S}" codeName="Mappe"/><bookViews/>'.encode())
    sheet = f'<worksheet xmlns="{NS_S}"><dimension ref="A1"/><sheetData/></worksheet>'.encode()
    assert sheet_codenames._named(sheet, "sheet1.xml", sheet_codenames.SHEET_PR, "Tabelle1") == sheet.replace(
        b"<dimension", f'<sheetPr xmlns="{NS_S}" codeName="Tabelle1"/><dimension'.encode())
    named = f'<worksheet xmlns="{NS_S}"><sheetPr codeName="Own"/><sheetData/></worksheet>'.encode()
    assert sheet_codenames._named(named, "sheet1.xml", sheet_codenames.SHEET_PR, "Tabelle1") == named
    bare = f'<worksheet xmlns="{NS_S}"><sheetPr filterMode="false"><pageSetUpPr/></sheetPr></worksheet>'.encode()
    assert sheet_codenames._named(bare, "sheet1.xml", sheet_codenames.SHEET_PR, "Tabelle1") == bare.replace(
        b'filterMode="false"', b'filterMode="false" codeName="Tabelle1"')
