"""What a workbook keeps from its user: a sheet only a macro unhides stays very hidden, the recommendation to open
it read-only, with its password to modify, stays in the result, and so does the protection of its structure and
windows, with its password."""

import re
import struct
import zipfile

import openpyxl
import pytest
from conftest import _soffice_save as soffice
from conftest import flat_odf
from workbooks import with_workbook_stream

from docshift.engine import Engine, convert, inventory, workbook_access
from docshift.engine.inventory.package import NS_S
from docshift.engine.inventory.xls import BIFF_BOUNDSHEET, BIFF_CODEPAGE
from docshift.engine.inventory.xls_views import BIFF_FILESHARING

# FILESHARING: read-only recommended, the hash of the password to modify, the user who set it ("Ann", 8-bit)
SHARING = struct.pack("<HHHB", 1, 0xCC3D, 3, 0) + b"Ann"
LOAD_READ_ONLY = re.compile(r'config:name="LoadReadonly" config:type="boolean">([a-z]+)<')


def shared(stream):
    """The Workbook ``stream`` with its sheet "Lists" very hidden (its BOUNDSHEET's hsState 2, where LibreOffice
    writes 1) and a FILESHARING record after its CODEPAGE; each BOUNDSHEET's offset of its sheet moved past it."""
    data, pos, out = bytes(stream), 0, []
    while pos + 4 <= len(data):
        rec_type, length = struct.unpack_from("<HH", data, pos)
        record = bytearray(data[pos:pos + 4 + length])
        if rec_type == BIFF_BOUNDSHEET:
            struct.pack_into("<I", record, 4, struct.unpack_from("<I", record, 4)[0] + 4 + len(SHARING))
            if b"Lists" in record:
                record[8] = (record[8] & ~0x03) | 2
        out.append(bytes(record))
        if rec_type == BIFF_CODEPAGE:
            out.append(struct.pack("<HH", BIFF_FILESHARING, len(SHARING)) + SHARING)
        pos += 4 + length
    return b"".join(out)


@pytest.fixture(scope="module")
def guarded(tmp_path_factory):
    """A .xls of three sheets, saved by LibreOffice: "Shown", "Lists" (very hidden) and "Old" (hidden), read-only
    recommended, with a password to modify."""
    out = tmp_path_factory.mktemp("access")
    book = openpyxl.Workbook()
    book.active.title = "Shown"
    book.active["A1"] = "see the lists"
    for name, state in (("Lists", "hidden"), ("Old", "hidden")):
        sheet = book.create_sheet(name)
        sheet["A1"] = name
        sheet.sheet_state = state
    book.save(out / "book.xlsx")
    return with_workbook_stream(soffice(out / "book.xlsx", "xls", out), shared, out / "guarded.xls")


def workbook(result):
    with zipfile.ZipFile(result) as package:
        return package.read("xl/workbook.xml").decode()


def states(xml):
    return dict(re.findall(r'<sheet name="([^"]+)"[^>]*? state="(\w+)"', xml))


def test_the_xls_says_what_it_keeps_from_its_user(guarded):
    holds = inventory.of_source(guarded, "xls")
    assert holds.very_hidden == ["Lists"]
    assert holds.sharing == {"readOnlyRecommended": "1", "reservationPassword": "CC3D", "userName": "Ann"}


def test_a_very_hidden_sheet_and_read_only_recommendation_are_kept(office, guarded, tmp_path):
    """A plain soffice's .xlsx makes the very hidden sheet one anyone can unhide and writes no ``fileSharing`` (it
    marks the workbook final instead, which Excel shows as a bar, and keeps no password to modify); docshift's keeps
    the sheet very hidden and writes the .xls's ``fileSharing`` after ``fileVersion``. LibreOffice reads from
    docshift's result that the workbook is to be opened read-only, as it reads it from the .xls."""
    plain = workbook(soffice(guarded, "xlsx", tmp_path / "plain"))
    assert states(plain) == {"Shown": "visible", "Lists": "hidden", "Old": "hidden"}
    assert "fileSharing" not in plain and "CC3D" not in plain
    converted = convert.convert(office, guarded, "xls", tmp_path / "work", 60)
    ours = workbook(converted.path)
    assert states(ours) == {"Shown": "visible", "Lists": "veryHidden", "Old": "hidden"}
    assert re.search(r'<fileVersion [^>]*/><fileSharing readOnlyRecommended="1" reservationPassword="CC3D" '
                     r'userName="Ann"/><workbookPr ', ours)
    assert LOAD_READ_ONLY.findall(soffice(guarded, "fods", tmp_path / "legacy").read_text()) == ["true"]
    assert LOAD_READ_ONLY.findall(soffice(converted.path, "fods", tmp_path / "read").read_text()) == ["true"]


@pytest.mark.parametrize("head", ['<workbook xmlns="{}">', '<x:workbook xmlns:x="{}"><x:fileVersion appName="a>b"/>'])
def test_file_sharing_goes_in_its_place_in_the_part_s_own_prefix(head, tmp_path):
    """Without a ``fileVersion`` a ``fileSharing`` goes first in the workbook; after one (whose attribute may hold a
    ``>``) right after it, in the prefix the part gives SpreadsheetML; one LibreOffice wrote gets only what it
    lacks; a sheet already very hidden, or nothing to write, leaves the file untouched."""
    head = head.format(NS_S)
    prefix = "x:" if head.startswith("<x:") else ""
    part = f'{head}<{prefix}sheets><{prefix}sheet name="L" state="hidden"/></{prefix}sheets></{prefix}workbook>'
    result = tmp_path / "book.xlsx"
    with zipfile.ZipFile(result, "w") as package:
        package.writestr("xl/workbook.xml", part)
    assert workbook_access.mend(result, "xls", ["L"], {"readOnlyRecommended": "1"}) == 2
    assert workbook(result) == part.replace(head, f'{head}<{prefix}fileSharing readOnlyRecommended="1"/>').replace(
        'state="hidden"', 'state="veryHidden"')
    before = workbook(result)
    assert workbook_access.mend(result, "xls", ["L"], {"readOnlyRecommended": "1"}) == 0
    assert workbook(result) == before
    assert workbook_access.mend(result, "xls", [], {"readOnlyRecommended": "1", "userName": "B"}) == 1
    assert workbook(result) == before.replace('readOnlyRecommended="1"/>', 'readOnlyRecommended="1" userName="B"/>')


STRUCTURE = re.compile(r'table:structure-protected="([a-z]+)"')


def protection(xml):
    """The attributes of the workbook's ``workbookProtection``, which must come right before its ``bookViews``."""
    found = re.search(r"<workbookProtection([^>]*)/><bookViews>", xml)
    return dict(re.findall(r'(\w+)="([^"]*)"', found.group(1))) if found else None


def locked(stream):
    """The Workbook ``stream`` with the globals' WINDOWPROTECT and PROTECT set and a PASSWORD hash, before its PROT4REV
    where Excel writes them (LibreOffice writes none of the three for a workbook it does not protect), and its
    PROT4REV set and PROT4REVPASS given a hash; each BOUNDSHEET's offset of its sheet moved past them."""
    added = b"".join(struct.pack("<HHH", rec_type, 2, value) for rec_type, value in
                     ((0x0019, 1), (0x0012, 1), (0x0013, 0xCC3D)))
    data, pos, out = bytes(stream), 0, []
    while pos + 4 <= len(data):
        rec_type, length = struct.unpack_from("<HH", data, pos)
        record = bytearray(data[pos:pos + 4 + length])
        if rec_type == BIFF_BOUNDSHEET:
            struct.pack_into("<I", record, 4, struct.unpack_from("<I", record, 4)[0] + len(added))
        if rec_type == 0x01AF:  # PROT4REV: the workbook's revisions locked too, and PROT4REVPASS's hash
            out.append(added)
            struct.pack_into("<H", record, 4, 1)
        if rec_type == 0x01BC:
            struct.pack_into("<H", record, 4, 0xBEEF)
        out.append(bytes(record))
        pos += 4 + length
    assert added in b"".join(out)
    return b"".join(out)


def test_a_protected_structure_and_its_windows_are_kept_with_their_password(office, guarded, tmp_path):
    """LibreOffice loads a workbook's PROTECT, WINDOWPROTECT and PASSWORD and writes ``<workbookProtection
    lockWindows="false"/>`` all the same: a plain soffice's .xlsx can have sheets added, removed and renamed.
    docshift's keeps what the .xls locks, and the password's hash."""
    source = with_workbook_stream(guarded, locked, tmp_path / "locked.xls")
    assert inventory.of_source(source, "xls").protection == {
        "lockStructure": "1", "lockWindows": "1", "workbookPassword": "CC3D", "lockRevision": "1",
        "revisionsPassword": "BEEF"}
    assert inventory.of_source(guarded, "xls").protection == {}
    plain = workbook(soffice(source, "xlsx", tmp_path / "plain"))
    assert "lockStructure" not in plain and "CC3D" not in plain
    assert protection(plain) == {"lockWindows": "true"}, "LibreOffice keeps the windows locked, nothing more"
    converted = convert.convert(office, source, "xls", tmp_path / "work", 60)
    assert protection(workbook(converted.path)) == {"lockStructure": "1", "lockWindows": "true",
                                                    "workbookPassword": "CC3D", "lockRevision": "1",
                                                    "revisionsPassword": "BEEF"}
    security = openpyxl.load_workbook(converted.path).security
    assert security.lockStructure and security.lockWindows and security.workbookPassword == "CC3D"
    assert security.lockRevision and security.revisionsPassword == "BEEF"


def test_a_structure_protected_as_excel_writes_it_is_kept(office, tmp_path):
    """Excel, and LibreOffice, write a workbook whose structure is protected encrypted with Excel's default password,
    which opens without asking: the workbook's records are read decrypted, and its protection kept, as openpyxl (as
    Excel) reads it. LibreOffice loads it from the .xls; its own OOXML import reads no ``lockStructure``."""
    body = ('<table:table table:name="One"><table:table-row><table:table-cell><text:p>one</text:p></table:table-cell>'
            '</table:table-row></table:table><table:table table:name="Two"/>')
    fods = tmp_path / "structure.fods"
    fods.write_text(flat_odf("spreadsheet", body).replace(
        "<office:spreadsheet>", '<office:spreadsheet table:structure-protected="true">'))
    source = soffice(fods, "xls", tmp_path / "xls")
    converted = Engine(office).convert(source, "xls", tmp_path / "work", 60)
    assert protection(workbook(converted.path)) == {"lockStructure": "1", "lockWindows": "false"}
    assert protection(workbook(soffice(source, "xlsx", tmp_path / "plain"))) == {"lockWindows": "false"}
    assert STRUCTURE.findall(soffice(source, "fods", tmp_path / "legacy").read_text()) == ["true"]
    assert openpyxl.load_workbook(converted.path).security.lockStructure
