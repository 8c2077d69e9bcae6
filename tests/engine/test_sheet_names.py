"""A workbook's defined names (``docshift/engine/sheet_names.py``): spelled as the .xls spells them (periods and
backslashes, which LibreOffice's import makes underscores) in their definitions and in the formulas that use them,
and hidden where the .xls hides them.

Made here: an .xls that LibreOffice saved with three names, whose NAME records are then given a period, a
backslash and the hidden flag, as Excel writes such names (a formula names a name by its NAME record, so the
formula follows).
"""

import re
import struct
import zipfile

import olefile
import openpyxl
import pytest
from conftest import ROOT
from conftest import _soffice_save as soffice
from openpyxl.workbook.defined_name import DefinedName
from workbooks import saved_as_xls

from docshift.engine import convert, sheet_names, sheet_rows

CORPUS = ROOT.parent / "shared" / "corpus" / "xls"
RESPELT = {b"First_Quarter": b"First.Quarter", b"Path_Name": b"Path\\Name"}


@pytest.fixture(scope="module")
def names_xls(tmp_path_factory):
    out = tmp_path_factory.mktemp("names")
    book = openpyxl.Workbook()
    sheet = book.active
    for row in range(1, 4):
        sheet.cell(row, 1, row * 10)
    sheet["B1"], sheet["B2"] = "=SUM(First_Quarter)", '=IF(Path_Name>0,"First_Quarter",0)'
    for name, target in (("First_Quarter", "$A$1:$A$3"), ("Path_Name", "$A$1"), ("solver_adj", "$A$2")):
        book.defined_names[name] = DefinedName(name, attr_text=f"Sheet!{target}")
    path = saved_as_xls(book, out, "names")
    with olefile.OleFileIO(str(path), write_mode=True) as ole:
        data = bytearray(ole.openstream("Workbook").read())
        at = 0
        while at + 4 <= len(data):
            rec_type, length = struct.unpack_from("<HH", data, at)
            body = at + 4
            if rec_type == sheet_names.BIFF_NAME:
                name = bytes(data[body + 15:body + 15 + data[body + 3]])
                if name in RESPELT:
                    data[body + 15:body + 15 + len(name)] = RESPELT[name]
                elif name == b"solver_adj":
                    data[body] |= sheet_names.HIDDEN
            at = body + length
        ole.write_stream("Workbook", bytes(data))
    return path


def workbook(path):
    """({name: its attributes}, the first sheet's formulas) of the workbook at ``path``."""
    with zipfile.ZipFile(path) as package:
        main, sheet = package.read("xl/workbook.xml").decode(), package.read("xl/worksheets/sheet1.xml").decode()
    names = {found.group(2): found.group(1) + found.group(3)
             for found in re.finditer(r'<definedName([^>]*?)name="([^"]*)"([^>]*)>', main)}
    return names, re.findall(r"<f[^>]*>([^<]*)</f>", sheet)


def test_names_keep_their_periods_backslashes_and_hidden_flags(office, names_xls, tmp_path):
    """A plain soffice writes First_Quarter, Path_Name and a visible solver_adj; docshift the .xls's spelling, in
    the definitions and in the formulas (not in a formula's string), and solver_adj hidden."""
    assert {spelled: name for (_, spelled), (name, _) in sheet_names.names_of(names_xls).items()} == {
        "First_Quarter": "First.Quarter", "Path_Name": "Path\\Name", "solver_adj": "solver_adj"}
    plain_names, plain_formulas = workbook(soffice(names_xls, "xlsx", tmp_path / "plain"))
    assert {"First_Quarter", "solver_adj"} <= set(plain_names) and 'hidden="false"' in plain_names["solver_adj"]
    converted = convert.convert(office, names_xls, "xls", tmp_path / "work", 60)
    names, formulas = workbook(converted.path)
    assert {"First.Quarter", "Path\\Name", "solver_adj"} <= set(names) and "First_Quarter" not in names
    assert 'hidden="1"' in names["solver_adj"] and 'hidden="1"' not in names["First.Quarter"]
    assert formulas == [f.replace("First_Quarter)", "First.Quarter)").replace("Path_Name>", "Path\\Name>")
                        for f in plain_formulas]
    assert '&quot;First_Quarter&quot;' in formulas[1]  # a string is text, not a name
    assert converted.fidelity["complete"] is True, converted.fidelity["lost"]
    openpyxl.load_workbook(converted.path)


def test_a_corpus_workbook_keeps_its_names(office, tmp_path):
    """``56450.xls`` holds 5,556 names: 75 that LibreOffice respells (periods, question marks), 162 hidden (Excel's
    report and Solver names); 55 more hold characters Excel's names may not (a control character, an arrow), which
    keep LibreOffice's spelling."""
    source = CORPUS / "56450.xls"
    held = sheet_names.names_of(source)
    respelt = {name for (_, spelled), (name, _) in held.items() if name != spelled}
    valid = {name for name in respelt if sheet_names.EXCEL_NAME.fullmatch(name)}
    hidden = {name for name, hide in held.values() if hide}
    assert (len(valid), len(respelt - valid), len(hidden)) == (75, 55, 162)
    respelt = valid
    names, _ = workbook(convert.convert(office, source, "xls", tmp_path / "work", 60).path)
    assert respelt <= set(names)
    assert all('hidden="1"' in names[name] for name in hidden if name in names)
    assert len([name for name in hidden if name in names]) == 162


def test_a_name_spelled_both_ways_stays_as_it_is():
    """Where the .xls has both a.b and a_b (case aside, as Excel reads names), or a sheet is named a_b, the result's
    a_b may be either: nothing is respelled."""
    names = {(None, "a_b"): ("a.b", False), (0, "a_b"): ("a_b", False)}
    assert sheet_names._renamed(names, {(None, "a_b"), (0, "a_b")}, set()) == {}
    cased = {(None, "A_B"): ("A.B", False), (0, "a_b"): ("a_b", False)}
    assert sheet_names._renamed(cased, {(None, "A_B"), (0, "a_b")}, set()) == {}
    alone = {(None, "a_b"): ("a.b", False)}
    assert sheet_names._renamed(alone, {(None, "a_b")}, {"A_b"}) == {}
    assert sheet_names._renamed(alone, {(None, "a_b")}, {"Sheet1"}) == {"a_b": "a.b"}


def test_only_names_are_respelled_in_a_formula():
    """A sheet's name (before "!"), a table's column and a name of another workbook (in brackets, or after "]!")
    keep the result's spelling; the name itself, alone or after its sheet, is respelled."""
    written = sheet_names._formulas(b"<f>SUM(a_b)+Sheet1!a_b+A_B*2+a_b!A1+T1[a_b]+[1]!a_b+&quot;a_b&quot;</f>",
                                    {"a_b": "a.b"})
    assert written == b"<f>SUM(a.b)+Sheet1!a.b+a.b*2+a_b!A1+T1[a_b]+[1]!a_b+&quot;a_b&quot;</f>"


def test_a_workbook_whose_records_do_not_read_leaves_the_result_as_it_is(tmp_path):
    """A compound file's header over bytes that are none: the names' and the rows' mends log it and change
    nothing, as every mend does, where before they raised out of the conversion."""
    broken = tmp_path / "broken.xls"
    broken.write_bytes(olefile.MAGIC + b"\xff" * 1000)
    result = tmp_path / "result.xlsx"
    openpyxl.Workbook().save(result)
    before = result.read_bytes()
    assert sheet_names.mend(result, broken, "xls") == 0 and sheet_rows.mend(result, broken, "xls") == 0
    assert result.read_bytes() == before
