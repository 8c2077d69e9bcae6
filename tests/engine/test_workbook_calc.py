"""How a workbook calculates: by hand, with R1C1 references. LibreOffice's import forgets both; the result gets them
back from the .xls, and LibreOffice reads from it that the workbook calculates by hand."""

import re
import struct
import zipfile

import pytest
from conftest import _soffice_save as soffice
from workbooks import records, two_sheets

from docshift.engine import convert, inventory, workbook_calc
from docshift.engine.inventory.package import NS_S
from docshift.engine.inventory.xls_views import BIFF_CALCMODE, BIFF_REFMODE

SAVE_RECALC = 0x005F
AUTO_CALCULATE = re.compile(r'config:name="AutoCalculate" config:type="boolean">([a-z]+)<')


def by_hand(stream):
    """The Workbook ``stream`` whose sheets calculate by hand (CALCMODE 0) and show R1C1 references (REFMODE 0).
    LibreOffice writes no CALCMODE (automatic is the default): each sheet's SAVERECALC, a record of the same size
    whose absence means its default, is made one, so that no offset of the stream moves."""
    data = bytearray(stream)
    for pos, rec_type, length in records(stream):
        if rec_type in (SAVE_RECALC, BIFF_REFMODE) and length == 2:
            struct.pack_into("<HHH", data, pos, BIFF_CALCMODE if rec_type == SAVE_RECALC else rec_type, 2, 0)
    return bytes(data)


@pytest.fixture(scope="module")
def manual(tmp_path_factory):
    """A .xls of two sheets saved by LibreOffice, then made to calculate by hand with R1C1 references."""
    return two_sheets(tmp_path_factory.mktemp("calc"), ("Model", "Inputs"), "of:=[.A1]*2", by_hand, "manual.xls")


def calculation(result):
    """The ``calcPr`` start tag of the .xlsx ``result``."""
    with zipfile.ZipFile(result) as package:
        return re.search(rb"<calcPr\b[^>]*>", package.read("xl/workbook.xml")).group().decode()


def test_the_xls_says_how_it_calculates(manual, tmp_path):
    assert inventory.of_source(manual, "xls").calculation == {"calcMode": "manual", "refMode": "R1C1"}
    plain = soffice(manual, "xls", tmp_path / "again")  # LibreOffice's own .xls of it: automatic, A1
    assert inventory.of_source(plain, "xls").calculation == {}


def test_a_workbook_calculated_by_hand_stays_so(office, manual, tmp_path):
    """A plain soffice's .xlsx calculates automatically with A1 references; docshift's as the .xls does, and
    LibreOffice reads from it that it calculates by hand (from the .xls it reads that it does not)."""
    plain = soffice(manual, "xlsx", tmp_path / "plain")
    assert 'refMode="A1"' in calculation(plain) and "calcMode" not in calculation(plain)
    converted = convert.convert(office, manual, "xls", tmp_path / "work", 60)
    assert 'calcMode="manual"' in calculation(converted.path) and 'refMode="R1C1"' in calculation(converted.path)
    assert AUTO_CALCULATE.findall(soffice(manual, "fods", tmp_path / "legacy").read_text()) == ["true"]
    assert AUTO_CALCULATE.findall(soffice(converted.path, "fods", tmp_path / "read").read_text()) == ["false"]


def test_only_what_differs_is_written(tmp_path):
    """Attributes already as wanted stay byte for byte; nothing to write leaves the file untouched."""
    result = tmp_path / "book.xlsx"
    workbook = (f'<workbook xmlns="{NS_S}"><sheets/><calcPr calcMode="manual" refMode="A1"/></workbook>').encode()
    with zipfile.ZipFile(result, "w") as package:
        package.writestr("xl/workbook.xml", workbook)
    assert workbook_calc.mend(result, "xls", {"calcMode": "manual"}) == 0
    assert workbook_calc.mend(result, "xls", {"calcMode": "manual", "refMode": "R1C1"}) == 1
    with zipfile.ZipFile(result) as package:
        assert package.read("xl/workbook.xml") == workbook.replace(b'refMode="A1"', b'refMode="R1C1"')
