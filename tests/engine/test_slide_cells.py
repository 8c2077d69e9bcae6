"""A table cell's margins: LibreOffice writes them on the cell's ``a:bodyPr``, where PowerPoint does not read them, and
the result gets them on ``a:tcPr`` too."""

import re
import zipfile

from conftest import ROOT
from conftest import _soffice_save as soffice

from docshift.engine import convert, slide_cells
from docshift.engine.inventory.package import NS_A

CORPUS = ROOT.parent / "shared" / "corpus" / "ppt"
CELL = re.compile(r"<a:tc>.*?</a:tc>", re.DOTALL)
INSETS = {"lIns": "marL", "rIns": "marR", "tIns": "marT", "bIns": "marB"}
DEFAULTS = {"marL": "91440", "marR": "91440", "marT": "45720", "marB": "45720"}


def cells(result):
    """[(the insets of its bodyPr, the margins of its tcPr)] of each table cell of the .pptx ``result``."""
    with zipfile.ZipFile(result) as package:
        slides = [package.read(name).decode() for name in package.namelist()
                  if re.fullmatch(r"ppt/slides/slide[0-9]+\.xml", name)]
    found = []
    for cell in (cell for slide in slides for cell in CELL.findall(slide)):
        body = re.search(r"<a:bodyPr\b[^>]*>", cell).group()
        properties = re.search(r"<a:tcPr\b[^>]*>", cell).group()
        found.append((dict(re.findall(r'\b([lrtb]Ins)="([0-9]+)"', body)),
                      dict(re.findall(r'\b(mar[LRTB])="([0-9]+)"', properties))))
    return found


def zero_insets(result, tmp_path):
    """How many table cells of no left margin LibreOffice writes, reading the .pptx ``result`` and saving it again."""
    return sum(1 for insets, _ in cells(soffice(result, "pptx", tmp_path)) if insets.get("lIns") == "0")


def test_a_table_s_cells_keep_their_margins(office, tmp_path):
    """``bug58733_671884.ppt``'s tables have cells of no margins. A plain soffice writes them on bodyPr only, and
    LibreOffice reads the plain result with its default margins; docshift's result has on each cell's tcPr the
    margins of its bodyPr, and LibreOffice, saving it again, keeps them."""
    source = CORPUS / "bug58733_671884.ppt"
    plain_path = soffice(source, "pptx", tmp_path / "plain")
    plain = cells(plain_path)
    lacking = [margins for insets, margins in plain if insets.get("lIns") == "0" and "marL" not in margins]
    assert len(plain) > 100 and len(lacking) > 40
    converted = convert.convert(office, source, "ppt", tmp_path / "work", 60).path
    ours = cells(converted)
    assert [insets for insets, _ in ours] == [insets for insets, _ in plain]
    for insets, margins in ours:
        assert {INSETS[inset]: value for inset, value in insets.items() if value != DEFAULTS[INSETS[inset]]} == {
            margin: value for margin, value in margins.items() if value != DEFAULTS[margin]}
    kept = sum(1 for insets, _ in ours if insets.get("lIns") == "0")
    assert zero_insets(converted, tmp_path / "read") == kept
    assert zero_insets(plain_path, tmp_path / "plain-read") < kept - 40


def test_a_cell_gets_only_the_margins_it_lacks():
    """Margins of its bodyPr that are not the defaults and that its tcPr has not; a shape's bodyPr outside a table and
    a cell without tcPr change nothing."""
    slide = (f'<p:sld xmlns:p="urn:p" xmlns:x="{NS_A}"><p:sp><p:txBody><x:bodyPr lIns="0"/></p:txBody></p:sp>'
             '<x:tbl><x:tr><x:tc><x:txBody><x:bodyPr lIns="0" rIns="91440" tIns="0" bIns="45000"/></x:txBody>'
             '<x:tcPr anchor="t" marL="12"/></x:tc><x:tc><x:txBody><x:bodyPr tIns="7"/></x:txBody></x:tc>'
             '<x:tc><x:txBody><x:bodyPr lIns="3"/></x:txBody><x:tcPr></x:tcPr></x:tc></x:tr></x:tbl></p:sld>').encode()
    written, given = slide_cells.margins(slide, "ppt/slides/slide1.xml")
    assert given == 2
    assert written == slide.replace(b'<x:tcPr anchor="t" marL="12"/>',
                                    b'<x:tcPr anchor="t" marL="12" marT="0" marB="45000"/>').replace(
        b"<x:tcPr></x:tcPr>", b'<x:tcPr marL="3"></x:tcPr>')
