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


def test_a_workbook_keeps_office_s_theme_colours(office, tmp_path):
    """``46137.xls`` names Office 2007's default theme: a plain soffice writes LibreOffice's theme (accent 1 green,
    18A303), under which the dashboard's table style draws green; docshift's result has Office's colours, accent 1
    4F81BD."""
    assert sheet_colours.workbook_theme(DASHBOARD) == sheet_colours.OFFICE_2007_THEME
    plain = scheme(soffice(DASHBOARD, "xlsx", tmp_path / "plain"))
    assert plain["accent1"] == "18A303"
    ours = scheme(convert.convert(office, DASHBOARD, "xls", tmp_path / "work", 60).path)
    assert ours == {slot: colour.upper() for slot, (colour, _) in zip(SLOTS, sheet_colours.OFFICE_2007_THEME.colours,
                                                                        strict=True)}
