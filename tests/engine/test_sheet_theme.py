"""A workbook's theme colours, which LibreOffice writes as its own theme's, put back into the .xlsx
(``docshift/engine/sheet_theme.py``)."""

import re
import zipfile

from conftest import ROOT
from conftest import _soffice_save as soffice

from docshift.engine import convert, sheet_colours

DASHBOARD = ROOT.parent / "shared" / "corpus" / "xls" / "46137.xls"  # Office 2007's default theme, by number
SLOTS = ("dk1", "lt1", "dk2", "lt2", "accent1", "accent2", "accent3", "accent4", "accent5", "accent6", "hlink",
         "folHlink")


def scheme(result):
    """{slot: RRGGBB} of the colour scheme of the theme of the workbook ``result``."""
    with zipfile.ZipFile(result) as package:
        theme = package.read("xl/theme/theme1.xml").decode()
    return {slot: colour.upper() for slot, colour in re.findall(
        r'<a:(\w+)><a:(?:srgbClr val|sysClr val="\w+" lastClr)="([0-9A-Fa-f]{6})"', theme) if slot in SLOTS}


def fonts(result):
    """(the headings' Latin font, the body's) of the theme of the workbook ``result``."""
    with zipfile.ZipFile(result) as package:
        theme = package.read("xl/theme/theme1.xml").decode()
    return tuple(re.search(rf'<a:{group}><a:latin typeface="([^"]*)"', theme)[1]
                 for group in ("majorFont", "minorFont"))


def test_a_workbook_keeps_office_s_theme_colours(office, tmp_path):
    """``46137.xls`` names Office 2007's default theme: a plain soffice writes LibreOffice's theme (accent 1 green,
    18A303), under which the dashboard's table style draws green, and its fonts, Arial; docshift's result has Office's
    colours, accent 1 4F81BD, and its fonts, Cambria and Calibri."""
    assert sheet_colours.workbook_theme(DASHBOARD) == sheet_colours.OFFICE_2007_THEME
    plain = soffice(DASHBOARD, "xlsx", tmp_path / "plain")
    assert scheme(plain)["accent1"] == "18A303" and fonts(plain) == ("Arial", "Arial")
    result = convert.convert(office, DASHBOARD, "xls", tmp_path / "work", 60).path
    assert fonts(result) == ("Cambria", "Calibri")
    ours = scheme(result)
    assert ours == {slot: colour.upper() for slot, (colour, _) in zip(SLOTS, sheet_colours.OFFICE_2007_THEME.colours,
                                                                        strict=True)}


def test_later_office_default_themes_are_kept(office, tmp_path):
    """``59264.xls`` names Office 2013's default theme by its version (153222), ``SUBSTITUTE.xls`` Office 2016's
    (166925): their results' themes hold those colours (accent 1 5B9BD5 and 4472C4, accent 5 the other), where a
    plain soffice writes LibreOffice's green; their heading font is Calibri Light where a plain soffice's is Arial."""
    for name, theme in (("59264.xls", sheet_colours.OFFICE_2013_THEME),
                        ("SUBSTITUTE.xls", sheet_colours.OFFICE_2016_THEME)):
        source = DASHBOARD.with_name(name)
        assert sheet_colours.workbook_theme(source) == theme
        assert scheme(soffice(source, "xlsx", tmp_path / "plain" / name))["accent1"] == "18A303"
        result = convert.convert(office, source, "xls", tmp_path / "work" / name, 60).path
        assert fonts(result) == ("Calibri Light", "Calibri")
        ours = scheme(result)
        assert ours == {slot: colour.upper() for slot, (colour, _) in zip(SLOTS, theme.colours, strict=True)}
    assert sheet_colours.OFFICE_2013_THEME.colours[4][0] == sheet_colours.OFFICE_2016_THEME.colours[8][0] == "5b9bd5"


def test_a_workbook_s_own_theme_keeps_its_fonts(office, tmp_path):
    """``MatrixFormulaEvalTestData.xls`` holds its theme's package, whose headings' and body's fonts are Calibri Light
    and Calibri; LibreOffice's theme names Arial for both."""
    source = DASHBOARD.with_name("MatrixFormulaEvalTestData.xls")
    assert fonts(soffice(source, "xlsx", tmp_path / "plain")) == ("Arial", "Arial")
    assert fonts(convert.convert(office, source, "xls", tmp_path / "work", 60).path) == ("Calibri Light", "Calibri")
