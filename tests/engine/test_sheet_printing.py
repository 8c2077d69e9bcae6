"""How a workbook's sheets print: comments where they show, black and white, errors blank. LibreOffice's model keeps
"print comments" only; the result gets the rest back from the .xls's SETUP records."""

import re
import struct
import zipfile

import pytest
from conftest import _soffice_save as soffice
from workbooks import record, records, rewritten, sheets_of, two_sheets, with_workbook_stream

from docshift.engine import convert, inventory, sheet_printing
from docshift.engine.inventory.package import NS_R, NS_S
from docshift.engine.inventory.xls_views import (
    BIFF_SETUP,
    MARGINS,
    NO_COLOUR,
    NO_PRINTER_SETTINGS,
    NOTES,
    PRINTER_SETTINGS,
)

BLANK_ERRORS = 1 << 10  # Setup's iErrors 1
BIFF_HEADER, BIFF_FOOTER, USER_VIEW_BEGIN, USER_VIEW_END = 0x0014, 0x0015, 0x01AA, 0x01AB
MARGINS_BY_KIND = {kind: code for code, kind in MARGINS.items()}
# the first sheet's margins, in inches: a bottom margin smaller than the footer's distance, as Excel allows
FIRST_MARGINS = {"left": 0.3, "right": 0.35, "top": 0.4, "bottom": 0.1, "header": 0.25, "footer": 0.2}


def printed_so(stream):
    """The Workbook ``stream`` whose first sheet's SETUP prints its comments as they show, in black and white, and
    its errors blank; its second sheet's as LibreOffice wrote it."""
    data = bytearray(stream)
    setups = [pos for pos, rec_type, length in records(stream) if rec_type == BIFF_SETUP and length >= 12]
    assert len(setups) == 2
    flags = struct.unpack_from("<H", data, setups[0] + 14)[0]
    struct.pack_into("<H", data, setups[0] + 14, flags | NOTES | NO_COLOUR | BLANK_ERRORS)
    return bytes(data)


@pytest.fixture(scope="module")
def printed(tmp_path_factory):
    return two_sheets(tmp_path_factory.mktemp("printing"), ("Claims", "Notes"), "of:=1/0", printed_so, "printed.xls")


def margined_so(stream):
    """The Workbook ``stream`` whose first sheet has ``FIRST_MARGINS`` (its SETUP's header and footer distances, and
    margin records of its own in place of LibreOffice's) and, as most sheets, no header or footer; its second sheet's
    as LibreOffice wrote them."""
    def edit(rec_type, body, before):
        if (rec_type in MARGINS or rec_type in (BIFF_HEADER, BIFF_FOOTER)) and before == 0:
            return b""
        if rec_type == BIFF_SETUP and before == 0:
            setup = bytearray(body)
            struct.pack_into("<dd", setup, 16, FIRST_MARGINS["header"], FIRST_MARGINS["footer"])
            return b"".join(record(MARGINS_BY_KIND[kind], struct.pack("<d", FIRST_MARGINS[kind]))
                            for kind in ("left", "right", "top", "bottom")) + record(rec_type, bytes(setup))
        return None

    return rewritten(stream, edit)


@pytest.fixture(scope="module")
def margined(tmp_path_factory):
    return two_sheets(tmp_path_factory.mktemp("margins"), ("Claims", "Notes"), "of:=1+1", margined_so, "margins.xls")


def page_margins(result):
    """[{margin: inches} of each sheet's ``pageMargins``] of the .xlsx ``result``, in its sheets' order."""
    return [{key: float(value) for key, value in re.findall(r'(\w+)="([^"]*)"',
                                                              re.search(r"<pageMargins [^>]*>", sheet).group())}
            for sheet in sheets_of(result)]


def test_a_sheet_keeps_its_margins(office, margined, tmp_path):
    """A plain soffice's .xlsx puts the first sheet's header and footer at LibreOffice's 0.512", as for any sheet
    without them; docshift's has the .xls's six margins, and the second sheet's as LibreOffice wrote them."""
    assert inventory.of_source(margined, "xls").margins["Claims"] == pytest.approx(FIRST_MARGINS)
    plain = page_margins(soffice(margined, "xlsx", tmp_path / "plain"))
    assert (plain[0]["header"], plain[0]["footer"]) == pytest.approx((0.5118, 0.5118), abs=1e-3)
    converted = page_margins(convert.convert(office, margined, "xls", tmp_path / "work", 60).path)
    assert converted[0] == pytest.approx(FIRST_MARGINS)
    assert converted[1] == plain[1]


def test_a_custom_view_s_page_setup_is_not_the_sheet_s(margined, tmp_path):
    """A custom view (USERSVIEWBEGIN .. USERSVIEWEND) keeps a SETUP and margins of its own, which Excel applies only
    when the view is shown: the sheet's are read from outside it."""
    def with_view(stream):
        def edit(rec_type, body, before):
            if rec_type == BIFF_SETUP and before == 0:
                view = bytearray(body)
                struct.pack_into("<dd", view, 16, 0.9, 0.9)
                struct.pack_into("<H", view, 10, struct.unpack_from("<H", view, 10)[0] | NOTES | NO_COLOUR)
                return record(rec_type, body) + record(USER_VIEW_BEGIN, bytes(64)) + \
                    record(MARGINS_BY_KIND["top"], struct.pack("<d", 2.0)) + record(rec_type, bytes(view)) + \
                    record(USER_VIEW_END, b"")
            return None
        return rewritten(stream, edit)

    viewed = inventory.of_source(with_workbook_stream(margined, with_view, tmp_path / "viewed.xls"), "xls")
    assert viewed.margins["Claims"] == pytest.approx(FIRST_MARGINS)
    assert "Claims" not in viewed.printing


def workbook(path, sheets):
    """A workbook package at ``path`` of ``sheets`` ({name: its worksheet's children}, in order), and no more."""
    names = list(sheets)
    with zipfile.ZipFile(path, "w") as package:
        listed = "".join(f'<sheet name="{name}" r:id="rId{number}"/>' for number, name in enumerate(names, 1))
        package.writestr("xl/workbook.xml",
                         f'<workbook xmlns="{NS_S}" xmlns:r="{NS_R}"><sheets>{listed}</sheets></workbook>')
        package.writestr("xl/_rels/workbook.xml.rels", '<Relationships xmlns="http://schemas.openxmlformats.org/'
                         'package/2006/relationships">' + "".join(
                             f'<Relationship Id="rId{number}" Target="worksheets/sheet{number}.xml"/>'
                             for number in range(1, len(names) + 1)) + "</Relationships>")
        for number, name in enumerate(names, 1):
            package.writestr(f"xl/worksheets/sheet{number}.xml",
                             f'<worksheet xmlns="{NS_S}">{sheets[name]}</worksheet>' if sheets[name]
                             else f'<worksheet xmlns="{NS_S}"/>')
    return path


def test_margins_as_written_stay(tmp_path):
    """A margin within a thousandth of an inch of the .xls's stays as LibreOffice wrote it; one outside Excel's range
    is not written."""
    result = workbook(tmp_path / "book.xlsx", {"A": '<pageMargins left="0.7875" right="0.7875" top="1.05277777777778" '
                                                    'bottom="1.05277777777778" header="0.7875" footer="0.7875"/>'})
    assert sheet_printing.mend(result, "xls", {}, {"A": {"left": 0.7874, "top": -1.0, "bottom": 60.0}}) == 0
    assert sheet_printing.mend(result, "xls", {}, {"A": {"left": 0.7874, "header": 0.3}}) == 1
    with zipfile.ZipFile(result) as package:
        assert '<pageMargins left="0.7875" right="0.7875" top="1.05277777777778" bottom="1.05277777777778" ' \
            'header="0.3" footer="0.7875"/>' in package.read("xl/worksheets/sheet1.xml").decode()


def unset_so(stream):
    """The Workbook ``stream`` whose first sheet's SETUP leaves the paper to the printer (fNoPls), its paper size
    (A3) and scale (50%) fields what an old Excel left there; its second sheet's as LibreOffice wrote it."""
    data = bytearray(stream)
    setup = next(pos for pos, rec_type, length in records(stream) if rec_type == BIFF_SETUP and length >= 12)
    struct.pack_into("<HH", data, setup + 4, 8, 50)
    flags = struct.unpack_from("<H", data, setup + 14)[0]
    struct.pack_into("<H", data, setup + 14, flags | NO_PRINTER_SETTINGS)
    return bytes(data)


def test_a_sheet_that_leaves_the_paper_to_the_printer_names_none(office, tmp_path):
    """A plain soffice's .xlsx names a paper size (its locale's) for a sheet whose .xls leaves the paper, the scale,
    the resolutions and the copies to the printer; docshift's names none of them, as an .xlsx says "the printer's",
    and keeps the second sheet's as LibreOffice wrote them."""
    unset = two_sheets(tmp_path, ("Claims", "Notes"), "of:=1+1", unset_so, "unset.xls")
    assert inventory.of_source(unset, "xls").printing["Claims"] == dict.fromkeys(PRINTER_SETTINGS)
    plain = page_setups(soffice(unset, "xlsx", tmp_path / "plain"))
    assert "paperSize" in plain[0]
    converted = page_setups(convert.convert(office, unset, "xls", tmp_path / "work", 60).path)
    assert converted[0] == {key: value for key, value in plain[0].items() if key not in PRINTER_SETTINGS}
    assert converted[1] == plain[1]


def page_setups(result):
    """[the attributes of each sheet's ``pageSetup``] of the .xlsx ``result``, in its sheets' order."""
    return [dict(re.findall(r'(\w+)="([^"]*)"', re.search(r"<pageSetup [^>]*>", sheet).group()))
            for sheet in sheets_of(result)]


def test_the_xls_says_how_its_sheets_print(printed):
    assert inventory.of_source(printed, "xls").printing == {
        "Claims": {"cellComments": "asDisplayed", "blackAndWhite": "true", "errors": "blank"}}


def test_a_sheet_prints_as_the_xls_says(office, printed, tmp_path):
    """A plain soffice's .xlsx prints the first sheet's comments at the end, in colour, its errors as shown;
    docshift's as the .xls says, and its second sheet as LibreOffice wrote it."""
    plain = page_setups(soffice(printed, "xlsx", tmp_path / "plain"))
    assert [plain[0].get(key) for key in ("cellComments", "blackAndWhite", "errors")] == ["atEnd", "false", None]
    converted = page_setups(convert.convert(office, printed, "xls", tmp_path / "work", 60).path)
    assert converted[0] == {**plain[0], "cellComments": "asDisplayed", "blackAndWhite": "true", "errors": "blank"}
    assert converted[1] == plain[1]


def test_only_what_differs_is_written(tmp_path):
    """Attributes already as wanted stay byte for byte; a sheet without ``pageSetup`` is left as it is."""
    result = workbook(tmp_path / "book.xlsx", {"A": '<pageSetup draft="true" cellComments="atEnd"/>', "B": ""})
    assert sheet_printing.mend(result, "xls", {"A": {"draft": "true"}, "B": {"draft": "true"}}) == 0
    assert sheet_printing.mend(result, "xls", {"A": {"draft": "true", "cellComments": "asDisplayed"}}) == 1
    with zipfile.ZipFile(result) as package:
        assert package.read("xl/worksheets/sheet1.xml").decode().endswith(
            '<pageSetup draft="true" cellComments="asDisplayed"/></worksheet>')
