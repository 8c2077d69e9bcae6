"""A workbook's ActiveX controls, which LibreOffice's .xlsx export writes not at all: docshift puts each back as
Excel 2007 writes it (``sheet_activex``), and LibreOffice reads from the result the controls it reads from the .xls.
A control in a group is placed where the group puts it (``test_sheet_shapes.py``)."""

import re
import struct
import zipfile

import olefile
import openpyxl
from conftest import _soffice_save as soffice
from test_sheet_controls import CORPUS, controls_libreoffice_reads
from workbooks import converted_whole, with_workbook_stream

from docshift.engine import convert, inventory, sheet_activex

CHECK_BOX = "{8BD21D40-EC42-11CE-9E0D-00AA006002F3}"  # Microsoft Forms 2.0's check box


def test_an_activex_check_box_comes_back_as_excel_2007_writes_it_and_libreoffice_reads_the_same_one(office, tmp_path):
    source = CORPUS / "WithCheckBoxes.xls"
    plain = soffice(source, "xlsx", tmp_path / "plain")
    with zipfile.ZipFile(plain) as package:
        assert not any("activeX" in name for name in package.namelist())
    assert inventory.of_result(plain, "xls").counts["controls"] == 0

    converted = converted_whole(office, source, tmp_path / "work", "controls", 1)
    with olefile.OleFileIO(str(source)) as ole:
        saved = ole.openstream("Ctls").read()  # the one control's class id and data
    with zipfile.ZipFile(converted.path) as package:
        names = package.namelist()
        ocx = package.read("xl/activeX/activeX1.xml").decode()
        sheet = package.read("xl/worksheets/sheet1.xml").decode()
        vml = package.read("xl/drawings/vmlDrawing1.vml").decode()
        types = package.read("[Content_Types].xml").decode()
        assert package.read("xl/activeX/activeX1.bin") == saved
        assert "activeX1.bin" in package.read("xl/activeX/_rels/activeX1.xml.rels").decode()
    assert f'ax:classid="{CHECK_BOX}" ax:persistence="persistStreamInit"' in ocx
    control = re.search(r'<control [^>]*shapeId="(\d+)"[^>]*name="CheckBox1"/>', sheet)
    assert control is not None and "<legacyDrawing " in sheet
    assert f'<v:shape id="CheckBox1" o:spid="_x0000_s{control.group(1)}" type="#_x0000_t201"' in vml
    assert '<x:ClientData ObjectType="Pict">' in vml and "<x:Anchor>1, " in vml
    assert 'PartName="/xl/activeX/activeX1.bin" ContentType="application/vnd.ms-office.activeX"' in types
    assert all(name in names for name in re.findall(r'PartName="/([^"]+)"', types))
    # LibreOffice itself finds in the result the control it finds in the legacy file: a check box, checked
    kept = controls_libreoffice_reads(converted.path, tmp_path)
    assert kept == controls_libreoffice_reads(source, tmp_path) == [("checkbox", "CheckBox1", None, None, None, None,
                                                                      None)]


D2 = struct.pack("<HH4xBHH", 12, 5, 0x24, 1, 3) + b"\0"  # an ObjFmla: cbFmla, cce, PtgRef $D$2, padding


def with_linked_cell(workbook, linked=D2):
    """The Workbook stream with its ActiveX control linked to the cell of the ObjFmla ``linked`` (a PictFmlaKey
    whose fmlaLinkedCell holds it), as Excel saves one; the offsets of the sheets after it move by the bytes it
    adds."""
    records, pos = [], 0
    while pos < len(workbook):
        size = struct.unpack_from("<H", workbook, pos + 2)[0]
        records.append(bytearray(workbook[pos:pos + 4 + size]))
        pos += 4 + size
    index = next(i for i, record in enumerate(records) if record[:2] == b"\x5d\x00" and b"Forms.CheckBox" in record)
    record = records[index]
    at = record.index(b"\x09\x00", 4 + 22)  # its FtPictFmla, after its FtCmo
    fmla_size = struct.unpack_from("<H", record, at + 4)[0]
    key_at = at + 6 + fmla_size + 8  # after lPosInCtlStm and cbBufInCtlStm
    body = record[:key_at] + struct.pack("<I", 0) + linked + b"\0\0" + record[key_at + 8:]
    added = len(body) - len(record)
    struct.pack_into("<H", body, at + 2, struct.unpack_from("<H", body, at + 2)[0] + added)
    struct.pack_into("<H", body, 2, len(body) - 4)
    start = sum(len(record) for record in records[:index])
    for record in records:
        if record[:2] == b"\x85\x00" and struct.unpack_from("<I", record, 4)[0] > start:
            struct.pack_into("<I", record, 4, struct.unpack_from("<I", record, 4)[0] + added)
    records[index] = body
    return b"".join(records)


def linked_workbook(out, linked=D2):
    """The corpus's WithCheckBoxes.xls written to ``out`` with its check box linked to the cell of ``linked``."""
    return with_workbook_stream(CORPUS / "WithCheckBoxes.xls", lambda stream: with_linked_cell(stream, linked), out)


def test_an_activex_control_linked_to_a_cell_comes_back_linked_to_it(office, tmp_path):
    source = linked_workbook(tmp_path / "linked.xls")
    legacy = controls_libreoffice_reads(source, tmp_path)
    assert legacy == [("checkbox", "CheckBox1", "Sheet1.D2", None, None, None, None)]  # it reads as Excel's would

    converted = convert.convert(office, source, "xls", tmp_path / "work", 60)
    assert converted.fidelity["counts"]["controls"] == {"source": 1, "result": 1}
    with zipfile.ZipFile(converted.path) as package:
        assert "<x:FmlaLink>$D$2</x:FmlaLink>" in package.read("xl/drawings/vmlDrawing1.vml").decode()
    assert controls_libreoffice_reads(converted.path, tmp_path) == legacy


def test_an_activex_control_linked_to_another_sheet_is_named_missing(office, tmp_path):
    another_sheet = struct.pack("<HH4xBHHH", 14, 7, 0x3A, 1, 1, 3) + b"\0"  # PtgRef3d: Sheet2!$D$2
    source = linked_workbook(tmp_path / "linked.xls", another_sheet)
    converted = convert.convert(office, source, "xls", tmp_path / "work", 60)
    assert converted.fidelity["counts"]["controls"] == {"source": 1, "result": 0}
    assert {"what": "controls", "count": 1, "detail": "1 of 1 controls is missing; missing: sheet 'Sheet1'"} \
        in converted.fidelity["lost"]


def obj(key=b""):
    """The body of an OBJ record of an ActiveX check box whose data lies at 0 in "Ctls", 24 bytes, with ``key``
    after them (its PictFmlaKey)."""
    embed = b"\x03\x10\x00\x00Forms.CheckBox.1\x00"
    fmla = struct.pack("<H", len(embed)) + embed + struct.pack("<II", 0, 24) + key
    return (struct.pack("<HHHHH", 0x15, 18, 0x08, 1, 0x6011) + bytes(12) + struct.pack("<HHH", 0x08, 2, 0x0011)
            + struct.pack("<HH", 0x09, len(fmla)) + fmla + bytes(4))


def test_what_an_activex_control_carries_and_what_is_left_out():
    saved = bytes.fromhex("40 1d d2 8b 42 ec ce 11 9e 0d 00 aa 00 60 02 f3") + bytes(8)
    assert sheet_activex._saved(obj(), saved) == (saved, [])
    assert sheet_activex._saved(obj(), saved[:20]) is None  # its data lies past the stream's end
    assert sheet_activex._saved(obj(), bytes(24)) is None  # no class id
    ref = struct.pack("<HH4xBHH", 12, 5, 0x24, 1, 0xC003) + b"\0"  # B4, relative
    area = struct.pack("<HH4xBHHHH", 16, 9, 0x25, 0, 4, 4, 4) + b"\0"  # $E$1:$E$5
    assert sheet_activex._saved(obj(bytes(4) + ref + area), saved) == (
        saved, ["<x:FmlaLink>D2</x:FmlaLink>", "<x:FmlaRange>$E$1:$E$5</x:FmlaRange>"])
    another_sheet = struct.pack("<HH4xBHHH", 14, 7, 0x3A, 0, 1, 3) + b"\0"  # PtgRef3d: another sheet's D2
    assert sheet_activex._saved(obj(bytes(4) + another_sheet + bytes(2)), saved) is None
    assert sheet_activex._name(obj(), 2) == "CheckBox2"


def test_a_control_the_result_holds_already_is_not_written_twice(tmp_path):
    book = openpyxl.Workbook()
    book.active.title = "Sheet1"
    book.save(tmp_path / "base.xlsx")
    with zipfile.ZipFile(tmp_path / "base.xlsx") as package:
        parts = {name: package.read(name) for name in package.namelist()}
    for name, control in (("own.xlsx", b'<controls><control shapeId="1025" name="CheckBox1"/></controls>'),
                          ("other.xlsx", b'<controls><control shapeId="1025" name="Other"/></controls>')):
        written = dict(parts)
        written["xl/worksheets/sheet1.xml"] = parts["xl/worksheets/sheet1.xml"].replace(
            b"</worksheet>", control + b"</worksheet>")
        with zipfile.ZipFile(tmp_path / name, "w") as package:
            for part, data in written.items():
                package.writestr(part, data)
    assert sheet_activex.mend(tmp_path / "own.xlsx", CORPUS / "WithCheckBoxes.xls", "xls", 1) == 0
    assert sheet_activex.mend(tmp_path / "other.xlsx", CORPUS / "WithCheckBoxes.xls", "xls", 1) == 1
    with zipfile.ZipFile(tmp_path / "other.xlsx") as package:
        sheet = package.read("xl/worksheets/sheet1.xml")
    assert sheet.count(b"<control ") == 2 and sheet.count(b"<controls>") == 1
