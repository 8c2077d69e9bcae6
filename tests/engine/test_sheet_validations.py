"""Data validation over whole columns: LibreOffice's export ends it some thousand rows down; the result covers the
rows the .xls does."""

import shutil

import openpyxl
from conftest import ROOT
from conftest import _soffice_save as soffice

from docshift.engine import biff, convert, sheet_validations
from docshift.engine.inventory.package import NS_S

CORPUS = ROOT.parent / "shared" / "corpus" / "xls"


def validations(path):
    """{(kind, first cell): the cells it covers, as openpyxl reads them} of the first sheet of ``path``."""
    sheet = openpyxl.load_workbook(path).worksheets[0]
    return {(rule.type, str(rule.sqref).split()[0].split(":")[0]): str(rule.sqref)
            for rule in sheet.data_validations.dataValidation}


def test_the_xls_gives_each_validation_its_ranges():
    """32822.xls's ISSUES sheet: two lists down columns D and F to the last row, and the headings' cells."""
    assert sheet_validations.ranges_of(CORPUS / "32822.xls") == {"ISSUES": [
        [(1, 3, 49, 3), (51, 3, 65535, 3)], [(1, 5, 49, 5), (51, 5, 65535, 5)], [(0, 3, 0, 3)], [(0, 5, 0, 5)]]}
    assert [sheet for _, sheet, *_ in biff.records(CORPUS / "32822.xls", {sheet_validations.BIFF_DV})] == \
        ["ISSUES"] * 4


def test_a_list_down_a_whole_column_covers_it(office, tmp_path):
    """A plain soffice ends 32822.xls's two drop-down lists at row 1063; docshift's result has them to row 65536,
    as the .xls (and LibreOffice's own ODF of it) has them, with every other validation as the plain one's."""
    source = tmp_path / "32822.xls"
    shutil.copy(CORPUS / "32822.xls", source)
    plain = validations(soffice(source, "xlsx", tmp_path / "plain"))
    assert plain[("list", "D2")] == "D2:D50 D52:D1063" and plain[("list", "F2")] == "F2:F50 F52:F1063"
    converted = convert.convert(office, source, "xls", tmp_path / "work", 60)
    result = validations(converted.path)
    assert result[("list", "D2")] == "D2:D50 D52:D65536" and result[("list", "F2")] == "F2:F50 F52:F65536"
    assert {key: cells for key, cells in result.items() if key[0] != "list"} == \
        {key: cells for key, cells in plain.items() if key[0] != "list"}


def test_only_a_validation_cut_at_a_row_is_widened():
    """Ranges cut at the result's last row (one ended there, one below it left out) get the DV's back; one that
    covers other cells, or as many as the DV, stays as it is."""
    dv = [(2, 10, 8, 10), (71, 10, 668, 10), (914, 10, 1732, 10), (1856, 10, 65535, 10)]
    whole = b"K3:K9 K72:K669 K915:K1733 K1857:K65536"
    sheet = (f'<worksheet xmlns="{NS_S}"><dataValidations><dataValidation type="list" '
             'sqref="K3:K9 K72:K669 K915:K1001"/><dataValidation type="list" sqref="K3:K9 K73:K80"/>'
             f'<dataValidation type="whole" sqref="{whole.decode()}"/></dataValidations></worksheet>').encode()
    widened, count = sheet_validations.widened(sheet, "sheet1.xml", [dv])
    assert count == 1
    assert widened == sheet.replace(b'sqref="K3:K9 K72:K669 K915:K1001"', b'sqref="' + whole + b'"')
