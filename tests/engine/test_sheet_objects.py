"""Every embedded object of an .xls reaches the .xlsx, on its sheet, with its own part: LibreOffice's export of a
spreadsheet writes charts but no OLE object (``docshift/engine/sheet_objects.py``).

Made here: an .xls with an embedded workbook on each of two sheets, each workbook saying which sheet it is on.
"""

import functools
import io
import operator
import posixpath
import re
import shutil
import struct
import zipfile
import zlib

import olefile
import openpyxl
import PIL.Image
import pytest
import xlrd
from conftest import _soffice_save as soffice
from conftest import flat_odf

from docshift.engine import convert, inventory, pictures, sheet_objects

SHEETS = 2
OLE_CONTENT_TYPE = "application/vnd.openxmlformats-officedocument.oleObject"


def _sheet(n, comment=False):
    """Sheet S<n> with an embedded workbook drawn n cm further right and down than the last (and a comment on A2)."""
    note = ('<table:table-row><table:table-cell office:value-type="string"><office:annotation svg:x="1cm" '
            'svg:y="1cm" svg:width="3cm" svg:height="1cm"><text:p>a note on this sheet</text:p></office:annotation>'
            '<text:p>noted</text:p></table:table-cell></table:table-row>') if comment else ""
    return (f'<table:table table:name="S{n}"><table:shapes><draw:frame draw:name="Obj{n}" svg:x="{2 * n}cm" '
            f'svg:y="{n}cm" svg:width="6cm" svg:height="3cm"><draw:object><office:document office:version="1.2" '
            'office:mimetype="application/vnd.oasis.opendocument.spreadsheet"><office:body><office:spreadsheet>'
            f'<table:table table:name="Inner{n}"><table:table-row><table:table-cell office:value-type="string">'
            f'<text:p>object on sheet {n}</text:p></table:table-cell></table:table-row></table:table>'
            '</office:spreadsheet></office:body></office:document></draw:object></draw:frame></table:shapes>'
            f'<table:table-row><table:table-cell office:value-type="float" office:value="{n}"><text:p>{n}</text:p>'
            f'</table:table-cell></table:table-row>{note}</table:table>')


def _grouped(sheet):
    """The sheet with its object put in a group beside a rectangle that reaches further left and down."""
    start, end = sheet.index("<draw:frame"), sheet.index("</draw:frame>") + len("</draw:frame>")
    rectangle = '<draw:rect svg:x="1cm" svg:y="6cm" svg:width="2cm" svg:height="1cm"/>'
    return sheet[:start] + "<draw:g>" + sheet[start:end] + rectangle + "</draw:g>" + sheet[end:]


def _xls(out, comment_on_first=False, group_first=False):
    """An .xls with an embedded workbook on each of two sheets (LibreOffice writes them as MBD storages)."""
    (out / "two.fods").write_text(flat_odf("spreadsheet", "".join(
        _grouped(_sheet(n)) if group_first and n == 1 else _sheet(n, comment_on_first and n == 1)
        for n in range(1, SHEETS + 1))))
    return soffice(out / "two.fods", "xls:MS Excel 97", out, "OpenDocument Spreadsheet Flat XML")


@pytest.fixture(scope="module")
def two_sheets(tmp_path_factory):
    return _xls(tmp_path_factory.mktemp("sheet-objects"))


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


def test_objects_join_the_comments_of_their_sheet(office, tmp_path):
    """LibreOffice writes a sheet's comments as a VML drawing of its own: the object's shape joins it, and the
    comment stays (before, such a sheet's objects were left out)."""
    (tmp_path / "made").mkdir()
    source = _xls(tmp_path / "made", comment_on_first=True)
    plain = soffice(source, "xlsx", tmp_path / "plain")
    with zipfile.ZipFile(plain) as package:  # LibreOffice's own drawing for the comment, and no object
        assert "<legacyDrawing" in package.read("xl/worksheets/sheet1.xml").decode()
        assert not [name for name in package.namelist() if name.startswith("xl/embeddings/")]

    converted = convert.convert(office, source, "xls", tmp_path / "work", 60)
    found = sheet_objects_of(converted.path)  # each object's shape is in the sheet's VML drawing
    assert [n for n, _, _, _, _ in found] == [1, 2]
    with zipfile.ZipFile(converted.path) as package:
        sheet = package.read("xl/worksheets/sheet1.xml").decode()
        assert sheet.count("<legacyDrawing") == 1
        vml = [name for name in package.namelist() if name.endswith(".vml")]
        assert len(vml) == SHEETS  # LibreOffice's drawing for sheet 1 was added to, not doubled
        drawing = package.read("xl/drawings/vmlDrawing1.vml").decode()
        assert 'ObjectType="Note"' in drawing and 'ObjectType="Pict"' in drawing
    assert openpyxl.load_workbook(converted.path)["S1"]["A2"].comment.text.strip() == "a note on this sheet"
    assert converted.fidelity["complete"] is True, converted.fidelity["lost"]

    reloaded = soffice(converted.path, "ods", tmp_path / "reload")
    assert [name for name, _, _, _ in frames(reloaded)] == ["S1", "S2"]
    with zipfile.ZipFile(reloaded) as package:
        assert "a note on this sheet" in package.read("content.xml").decode()


def test_a_group_written_whole_by_libreoffice_does_not_keep_the_other_sheets_objects_out(office, tmp_path):
    """LibreOffice's export writes a group whole, the object in it too: that sheet stays as it wrote it, and the
    object it dropped on the other sheet goes in (before, any object of LibreOffice's kept every sheet out)."""
    (tmp_path / "made").mkdir()
    source = _xls(tmp_path / "made", group_first=True)
    loaded = frames(soffice(source, "ods", tmp_path / "ods"))
    assert [name for name, _, _, _ in loaded] == ["S1", "S2"]
    plain = soffice(source, "xlsx", tmp_path / "plain")
    with zipfile.ZipFile(plain) as package:
        assert [name for name in package.namelist() if name.startswith("xl/embeddings/")] == [
            "xl/embeddings/oleObject1.bin"]  # the group's; the second sheet's object is gone

    converted = convert.convert(office, source, "xls", tmp_path / "work", 60)
    assert [n for n, _, _, _, _ in sheet_objects_of(converted.path)] == [2]
    with zipfile.ZipFile(converted.path) as package:
        embedded = sorted(name for name in package.namelist() if name.startswith("xl/embeddings/"))
        assert len(embedded) == SHEETS
        assert "<oleObjects" not in package.read("xl/worksheets/sheet1.xml").decode()  # not written twice
    assert converted.fidelity["counts"]["embedded_objects"] == {"source": SHEETS, "result": SHEETS}
    assert converted.fidelity["complete"] is True, converted.fidelity["lost"]
    # LibreOffice reads its own group back with a picture in the object's place (from its plain export too); the
    # second sheet's object is an object again, where the source drew it
    reloaded = frames(soffice(converted.path, "ods", tmp_path / "reload"))
    assert [name for name, _, _, _ in reloaded] == ["S2"]
    (_, _, x, y), (_, _, x0, y0) = reloaded[0], loaded[1]
    assert abs(x - x0) < 0.1 and abs(y - y0) < 0.1


def _blip(kind, instance, body):
    return struct.pack("<HHI", instance << 4, kind, len(body)) + body


def _metafile(data, bounds, size, deflate=True):
    packed = zlib.compress(data) if deflate else data
    return (b"\x11" * 16 + struct.pack("<I4i2iI", len(data), *bounds, *size, len(packed))
            + (b"\x00" if deflate else b"\xfe") + b"\xfe" + packed)


def test_a_wmf_replacement_image_gets_its_placeable_header_back(tmp_path):
    """Office keeps a WMF in a BLIP without its placeable header: the part gets one, sized as the BLIP says."""
    # a metafile of its header and its end record, 2 inches by 1 at 1440 units an inch
    wmf = struct.pack("<HHHIHIH", 1, 9, 0x300, 12, 0, 3, 0) + struct.pack("<IH", 3, 0)
    record = _blip(0xF01B, 0x216, _metafile(wmf, (0, 0, 2880, 1440), (2 * 914400, 914400)))
    picture = pictures.picture(record, 0xF01B, 0x216, 8, len(record), 1 << 20)
    assert (picture.extension, picture.content_type) == ("wmf", "image/x-wmf")
    assert picture.data[22:] == wmf
    key, _, left, top, right, bottom, inch, _, checksum = struct.unpack_from("<IH4hHIH", picture.data)
    assert (key, left, top, right, bottom, inch) == (0x9AC6CDD7, 0, 0, 2880, 1440, 1440)
    words = struct.unpack_from("<10H", picture.data)
    assert checksum == functools.reduce(operator.xor, words)
    (tmp_path / "image.wmf").write_bytes(picture.data)
    with PIL.Image.open(tmp_path / "image.wmf") as image:  # Pillow reads the size from the placeable header
        assert image.format == "WMF" and image.size[0] == 2 * image.size[1]
    # one that has its header already, stored as it is, keeps it
    record = _blip(0xF01B, 0x217, b"\x22" * 16 + _metafile(picture.data, (0, 0, 1, 1), (1, 1), deflate=False))
    assert pictures.picture(record, 0xF01B, 0x217, 8, len(record), 1 << 20).data == picture.data


def test_a_dib_replacement_image_becomes_a_bmp(tmp_path):
    bmp = tmp_path / "made.bmp"
    PIL.Image.new("P", (3, 2), 7).save(bmp)  # a colour table of its own
    dib = bmp.read_bytes()[14:]
    record = _blip(0xF01F, 0x7A8, b"\x33" * 16 + b"\xff" + dib)
    picture = pictures.picture(record, 0xF01F, 0x7A8, 8, len(record), 1 << 20)
    assert (picture.extension, picture.content_type) == ("bmp", "image/bmp")
    assert picture.data == bmp.read_bytes()
    (tmp_path / "image.bmp").write_bytes(picture.data)
    with PIL.Image.open(tmp_path / "image.bmp") as image:
        assert image.size == (3, 2) and image.convert("RGB").getpixel((0, 0)) == PIL.Image.open(bmp).convert(
            "RGB").getpixel((0, 0))


def test_an_image_ooxml_does_not_hold_gives_a_blank_one():
    record = _blip(0xF01C, 0x542, _metafile(b"PICT", (0, 0, 1, 1), (1, 1)))  # a Mac PICT
    assert pictures.picture(record, 0xF01C, 0x542, 8, len(record), 1 << 20) is None
    blank = pictures.blank_png()
    with PIL.Image.open(io.BytesIO(blank.data)) as image:
        assert image.size == (1, 1) and image.convert("RGB").getpixel((0, 0)) == (255, 255, 255)
