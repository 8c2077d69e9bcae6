"""The macro a workbook's drawing shape runs when clicked, which LibreOffice's .xlsx export drops: docshift writes
it on the shape as Excel does (``shape_macros``), where the result keeps the VBA project."""

import xml.etree.ElementTree as ElementTree
import zipfile

from conftest import _soffice_save as soffice
from test_sheet_controls import CORPUS
from workbooks import parts_of, with_drawing

from docshift.contract import Macros
from docshift.engine import convert, inventory, shape_macros
from docshift.engine.inventory import fidelity
from docshift.engine.inventory.package import Package

XDR = "http://schemas.openxmlformats.org/drawingml/2006/spreadsheetDrawing"
DRAWING = (f'<xdr:wsDr xmlns:xdr="{XDR}" xmlns:a="http://schemas.openxmlformats.org/drawingml/2006/main">'
           + "".join(f'<xdr:twoCellAnchor><xdr:from><xdr:col>1</xdr:col><xdr:colOff>0</xdr:colOff><xdr:row>{row}'
                     f'</xdr:row><xdr:rowOff>0</xdr:rowOff></xdr:from><xdr:to><xdr:col>3</xdr:col><xdr:colOff>0'
                     f'</xdr:colOff><xdr:row>{row + 2}</xdr:row><xdr:rowOff>0</xdr:rowOff></xdr:to>'
                     f'<xdr:sp{macro}><xdr:nvSpPr><xdr:cNvPr id="{row + 2}" name="{name}"/><xdr:cNvSpPr/>'
                     '</xdr:nvSpPr><xdr:spPr><a:prstGeom prst="rect"><a:avLst/></a:prstGeom></xdr:spPr></xdr:sp>'
                     '<xdr:clientData/></xdr:twoCellAnchor>'
                     for row, name, macro in ((2, "Run it", ' macro="[0]!TestMacro"'), (6, "Just a box", "")))
           + "</xdr:wsDr>")


def workbook_with_shape_macro(tmp_path):
    """The corpus's SimpleMacro.xls given a rectangle that runs its TestMacro when clicked, and one that runs
    nothing: saved as .xlsm by LibreOffice, the two written into its first sheet's drawing as Excel writes shapes,
    and saved as .xls again (its VBA project kept)."""
    macro_enabled = soffice(CORPUS / "SimpleMacro.xls", "xlsm:Calc MS Excel 2007 VBA XML", tmp_path / "xlsm")
    with_drawing(parts_of(macro_enabled), DRAWING, tmp_path / "shapes.xlsm", "drawing9.xml")
    return soffice(tmp_path / "shapes.xlsm", "xls", tmp_path / "legacy")


def clicks_libreoffice_reads(path, tmp_path):
    """{shape name: the scripts its click runs} of the drawing shapes LibreOffice reads from ``path``."""
    ods = soffice(path, "ods", tmp_path / f"clicks-{path.suffix[1:]}")
    root = ElementTree.fromstring(zipfile.ZipFile(ods).read("content.xml"))
    draw = "urn:oasis:names:tc:opendocument:xmlns:drawing:1.0"
    return {element.get(f"{{{draw}}}name"): sorted(listener.get("{http://www.w3.org/1999/xlink}href", "")
                                                   for listener in element.iter()
                                                   if listener.tag.endswith("}event-listener"))
            for element in root.iter() if element.tag == f"{{{draw}}}custom-shape"}


def macros_on_shapes(path):
    """{shape name: its macro} of the first sheet's drawing of the .xlsx or .xlsm at ``path``."""
    found: dict[str, str] = {}
    with zipfile.ZipFile(path) as zf:
        package = Package(zf)
        drawing = next(name for name in package.names if name.startswith("xl/drawings/drawing"))
        root = ElementTree.fromstring(zf.read(drawing))
        for shape in root.iter(f"{{{XDR}}}sp"):
            found[shape.find(f".//{{{XDR}}}cNvPr").get("name")] = shape.get("macro")
    return found


def test_a_shape_runs_its_macro_in_the_macro_enabled_result_as_it_does_in_the_legacy_file(office, tmp_path):
    source = workbook_with_shape_macro(tmp_path)
    legacy = clicks_libreoffice_reads(source, tmp_path)
    assert len(legacy["Run it"]) == 1 and "TestMacro" in legacy["Run it"][0] and legacy["Just a box"] == []
    plain = soffice(source, "xlsm:Calc MS Excel 2007 VBA XML", tmp_path / "plain")
    assert macros_on_shapes(plain) == {"Run it": None, "Just a box": None}  # LibreOffice's export drops it

    converted = convert.convert(office, source, "xls", tmp_path / "work", 60)
    assert converted.path.suffix == ".xlsm"
    assert converted.fidelity["counts"]["actions"] == {"source": 1, "result": 1}
    assert converted.fidelity["complete"] is True, converted.fidelity["lost"]
    # the defined name the .xls's OBJ record names: LibreOffice's own .xls names the macro with its module
    assert macros_on_shapes(converted.path) == {"Run it": "[0]!Module1.TestMacro", "Just a box": None}
    assert clicks_libreoffice_reads(converted.path, tmp_path) == legacy

    removed = convert.convert(office, source, "xls", tmp_path / "removed", 60, macros=Macros.REMOVE)
    assert macros_on_shapes(removed.path) == {"Run it": None, "Just a box": None}
    assert {"what": "actions", "count": 1, "detail": "1 macro action removed on request"} in removed.fidelity["lost"]
    assert removed.fidelity["complete"] is True, removed.fidelity["lost"]


def test_a_shape_s_macro_is_counted_where_the_workbook_has_its_project_and_named_where_it_is_lost(office, tmp_path):
    source = workbook_with_shape_macro(tmp_path)
    assert inventory.of_source(source, "xls").counts["actions"] == 1
    assert inventory.of_source(CORPUS / "SimpleMacro.xls", "xls").counts["actions"] == 0
    plain = soffice(source, "xlsm:Calc MS Excel 2007 VBA XML", tmp_path / "plain")
    assert inventory.of_result(plain, "xls").counts["actions"] == 0
    lost = fidelity.report(inventory.of_source(source, "xls"), inventory.of_result(plain, "xls"))
    assert {"what": "actions", "count": 1, "detail": "1 of 1 actions is missing; missing: sheet 'Sheet1'"} \
        in lost["lost"] and lost["complete"] is False


def test_a_shape_is_given_its_macro_by_its_name_where_the_name_is_one_of_a_kind():
    drawing = DRAWING.encode()
    edited, given = shape_macros._given(drawing.replace(b' macro="[0]!TestMacro"', b""), "d.xml",
                                        {"Run it": "[0]!Other", "Gone": "[0]!X"})
    assert given == 1 and edited.count(b'<xdr:sp macro="[0]!Other">') == 1
    assert edited.replace(b' macro="[0]!Other"', b"") == drawing.replace(b' macro="[0]!TestMacro"', b"")
    # a shape that runs a macro already keeps it; two shapes of one name are neither of them given one
    assert shape_macros._given(drawing, "d.xml", {"Run it": "[0]!Other"}) == (drawing, 0)
    twice = drawing.replace(b'name="Just a box"', b'name="Run it"').replace(b' macro="[0]!TestMacro"', b"")
    assert shape_macros._given(twice, "d.xml", {"Run it": "[0]!Other"}) == (twice, 0)
