"""Every embedded object of an .xls reaches the .xlsx, on its sheet, with its own part: LibreOffice's export of a
spreadsheet writes charts but no OLE object (``docshift/engine/sheet_objects.py``).

Made here: an .xls with an embedded workbook on each of two sheets, each workbook saying which sheet it is on.
"""

import posixpath
import re
import shutil
import zipfile

import olefile
import openpyxl
import pytest
import xlrd
from conftest import _soffice_save as soffice

from docshift.engine import convert, inventory, sheet_objects

SHEETS = 2
OLE_CONTENT_TYPE = "application/vnd.openxmlformats-officedocument.oleObject"
TABLE = "urn:oasis:names:tc:opendocument:xmlns:table:1.0"


def _sheet(n):
    """Sheet S<n> with an embedded workbook drawn n cm further right and down than the last."""
    return (f'<table:table table:name="S{n}"><table:shapes><draw:frame draw:name="Obj{n}" svg:x="{2 * n}cm" '
            f'svg:y="{n}cm" svg:width="6cm" svg:height="3cm"><draw:object><office:document office:version="1.2" '
            'office:mimetype="application/vnd.oasis.opendocument.spreadsheet"><office:body><office:spreadsheet>'
            f'<table:table table:name="Inner{n}"><table:table-row><table:table-cell office:value-type="string">'
            f'<text:p>object on sheet {n}</text:p></table:table-cell></table:table-row></table:table>'
            '</office:spreadsheet></office:body></office:document></draw:object></draw:frame></table:shapes>'
            f'<table:table-row><table:table-cell office:value-type="float" office:value="{n}"><text:p>{n}</text:p>'
            '</table:table-cell></table:table-row></table:table>')


@pytest.fixture(scope="module")
def two_sheets(tmp_path_factory):
    """An .xls with an embedded workbook on each of two sheets (LibreOffice writes them as MBD storages)."""
    out = tmp_path_factory.mktemp("sheet-objects")
    (out / "two.fods").write_text(
        '<?xml version="1.0" encoding="UTF-8"?><office:document '
        'xmlns:office="urn:oasis:names:tc:opendocument:xmlns:office:1.0" '
        'xmlns:text="urn:oasis:names:tc:opendocument:xmlns:text:1.0" '
        f'xmlns:table="{TABLE}" xmlns:draw="urn:oasis:names:tc:opendocument:xmlns:drawing:1.0" '
        'xmlns:svg="urn:oasis:names:tc:opendocument:xmlns:svg-compatible:1.0" office:version="1.2" '
        'office:mimetype="application/vnd.oasis.opendocument.spreadsheet"><office:body><office:spreadsheet>'
        + "".join(_sheet(n) for n in range(1, SHEETS + 1))
        + "</office:spreadsheet></office:body></office:document>")
    return soffice(out / "two.fods", "xls:MS Excel 97", out, "OpenDocument Spreadsheet Flat XML")


def source_storages(path):
    """{MBD storage name: {stream path: bytes}} of the .xls, read by olefile."""
    found = {}
    with olefile.OleFileIO(str(path)) as ole:
        for entry in ole.listdir():
            if entry[0].upper().startswith("MBD"):
                found.setdefault(entry[0], {})["/".join(entry[1:])] = ole.openstream(entry).read()
    return found


def streams(data):
    with olefile.OleFileIO(data) as ole:
        return {"/".join(entry): ole.openstream(entry).read() for entry in ole.listdir()}


def sheet_objects_of(path):
    """[(sheet number, embedded part, its bytes, ProgID, from (col, row))] of each oleObject, from the XML."""
    found = []
    with zipfile.ZipFile(path) as package:
        names = package.namelist()
        assert len(names) == len(set(names))
        for n in range(1, SHEETS + 1):
            sheet = package.read(f"xl/worksheets/sheet{n}.xml").decode()
            rels = package.read(f"xl/worksheets/_rels/sheet{n}.xml.rels").decode()
            choices = re.findall(r"<mc:Choice [^>]*>(.*?)</mc:Choice>", sheet)
            for choice in choices:
                rid = re.search(r'<oleObject [^>]*r:id="([^"]+)"', choice).group(1)
                target = re.search(rf'<Relationship Id="{rid}" [^>]*Target="([^"]+)"', rels).group(1)
                part = posixpath.normpath(posixpath.join("xl/worksheets", target))
                prog = re.search(r'progId="([^"]*)"', choice)
                start = re.search(r"<from><xdr:col>(\d+)</xdr:col>.*?<xdr:row>(\d+)</xdr:row>", choice)
                found.append((n, part, package.read(part), prog and prog.group(1),
                              (int(start.group(1)), int(start.group(2)))))
            # Excel shows an OLE object through the sheet's VML drawing: a shape of the same id
            for shape_id in re.findall(r'<oleObject [^>]*shapeId="(\d+)"', sheet):
                vml_rid = re.search(r'<legacyDrawing [^>]*r:id="([^"]+)"', sheet).group(1)
                vml = re.search(rf'<Relationship Id="{vml_rid}" [^>]*Target="([^"]+)"', rels).group(1)
                assert f'id="_x0000_s{shape_id}"' in package.read(posixpath.normpath(
                    posixpath.join("xl/worksheets", vml))).decode()
    return found


def frames(ods):
    """[(sheet name, object href, x in inches, y in inches)] of the OLE objects LibreOffice loaded."""
    with zipfile.ZipFile(ods) as package:
        content = package.read("content.xml").decode()
        found = []
        for name, body in re.findall(r'<table:table table:name="([^"]+)"(.*?)</table:table>', content, re.S):
            for x, y, href in re.findall(r'<draw:frame [^>]*svg:x="([0-9.]+)in" svg:y="([0-9.]+)in"[^>]*>'
                                         r'<draw:object(?:-ole)? [^>]*xlink:href="\./([^"]+)"', body):
                found.append((name, package.read(href), float(x), float(y)))
    return found


def test_objects_on_two_sheets_reach_the_xlsx(two_sheets, office, tmp_path):
    storages = source_storages(two_sheets)
    assert len(storages) == SHEETS
    assert inventory.of_source(two_sheets, "xls").counts["embedded_objects"] == SHEETS
    # what LibreOffice itself writes: no object at all (the loss mended here), though it loaded each
    plain = soffice(two_sheets, "xlsx", tmp_path / "plain")
    with zipfile.ZipFile(plain) as package:
        assert not [name for name in package.namelist() if name.startswith("xl/embeddings/")]
    loaded = frames(soffice(two_sheets, "ods", tmp_path / "ods"))
    assert [name for name, _, _, _ in loaded] == ["S1", "S2"]

    converted = convert.convert(office, two_sheets, "xls", tmp_path / "work", 60)
    found = sheet_objects_of(converted.path)
    assert [n for n, _, _, _, _ in found] == [1, 2]
    assert len({part for _, part, _, _, _ in found}) == SHEETS
    for n, _, data, prog_id, _ in found:
        assert streams(data) in storages.values()  # the source's own storage, stream for stream
        inner = xlrd.open_workbook(file_contents=streams(data)["Workbook"])
        assert inner.sheet_by_index(0).cell_value(0, 0) == f"object on sheet {n}"
        assert prog_id and prog_id.startswith("Excel.Sheet")
    assert found[0][4] != found[1][4]  # drawn in other places, anchored in other cells
    with zipfile.ZipFile(converted.path) as package:
        types = package.read("[Content_Types].xml").decode()
        for _, part, _, _, _ in found:
            assert f'PartName="/{part}" ContentType="{OLE_CONTENT_TYPE}"' in types
    assert converted.fidelity["counts"]["embedded_objects"] == {"source": SHEETS, "result": SHEETS}
    assert converted.fidelity["complete"] is True, converted.fidelity["lost"]

    # openpyxl and LibreOffice open it again: each sheet its own object, where the source drew it
    assert openpyxl.load_workbook(converted.path).sheetnames == ["S1", "S2"]
    reloaded = frames(soffice(converted.path, "ods", tmp_path / "reload"))
    assert [name for name, _, _, _ in reloaded] == ["S1", "S2"]
    for (_, data, x, y), (_, _, x0, y0), (_, _, source, _, _) in zip(reloaded, loaded, found):
        assert data == source
        assert abs(x - x0) < 0.1 and abs(y - y0) < 0.1  # inches: column widths are counted as Excel does


def test_an_export_with_objects_already_is_left_as_it_is(two_sheets, tmp_path):
    """Objects that have parts already (here, put in before) are not written again."""
    plain = soffice(two_sheets, "xlsx", tmp_path)
    assert sheet_objects.mend(plain, two_sheets, "xls") == SHEETS
    before = plain.read_bytes()
    assert sheet_objects.mend(plain, two_sheets, "xls") == 0
    assert plain.read_bytes() == before


def test_a_source_that_does_not_read_leaves_the_export_as_it_is(two_sheets, tmp_path):
    plain = soffice(two_sheets, "xlsx", tmp_path)
    before = plain.read_bytes()
    broken = tmp_path / "broken.xls"
    shutil.copy(two_sheets, broken)
    with broken.open("r+b") as handle:  # the compound file's header gone: no storage to read
        handle.write(b"\0" * 512)
    assert sheet_objects.mend(plain, broken, "xls") == 0
    assert plain.read_bytes() == before
