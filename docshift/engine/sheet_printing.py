"""How a workbook's sheets print, put back into the .xlsx where LibreOffice's model has no room for it.

A sheet's SETUP record says, besides the paper, whether its comments print as they show on the sheet or at the end,
whether it prints in black and white or as a draft, and how a cell's error prints (blank, a dash, #N/A).
LibreOffice knows "print comments" and nothing more. Its export writes ``cellComments="atEnd"`` for comments
printed as they show, ``blackAndWhite="false"`` and errors as shown. Of 685 workbooks of the corpus and POI's and
LibreOffice's tests, 49 sheets printed their comments where they show and 11 in black and white; one printed errors
blank.

The same record holds how far the header and footer are from the page's edge, and the sheet's margin records its
margins. LibreOffice's model has a header or footer area, not a distance: its export writes 0.512" for the header of
a sheet without one, and makes a bottom margin no smaller than the footer's distance (the margins of 1,039 sheets of
420 of those workbooks came out otherwise than the .xls has them, a header on 0.25" printed at 0.512").

A SETUP record may also leave the paper size, scale, resolutions and copies to the printer (fNoPls); LibreOffice
then writes its locale's paper (Letter in the engine) as the sheet's, for 818 sheets of 331 of those workbooks. An
.xlsx says "the printer's" by naming none of them (``usePrinterDefaults``, true by default).

``mend`` gives each such sheet's ``pageSetup`` the attributes the .xls has (``Inventory.printing``, from the pass
over its records) where LibreOffice wrote others, and leaves out those the printer decides; and its ``pageMargins``
each margin the .xls's records give (``Inventory.margins``) that LibreOffice wrote otherwise. A sheet LibreOffice
wrote no such element for is left as it is, and so is every other byte.
"""

from pathlib import Path

from docshift.engine import ooxml, sheet_objects
from docshift.engine.embedding import PartEdit
from docshift.engine.inventory.package import NS_S, SEP
from docshift.engine.sheet_skeleton import without_cells

PAGE_SETUP, PAGE_MARGINS = f"{NS_S}{SEP}pageSetup", f"{NS_S}{SEP}pageMargins"
MARGIN_TOLERANCE = 0.001  # inches: LibreOffice keeps margins in hundredths of a millimetre
LARGEST_MARGIN = 49.0  # inches, Excel's


def mend(result: Path, kind: str, printing: dict[str, dict[str, str | None]],
         margins: dict[str, dict[str, float]] | None = None) -> int:
    """Give the sheets of ``result`` (LibreOffice's export of an .xls) the ``printing`` settings ({sheet name:
    ``pageSetup``'s attributes, None for one to leave out}) and ``margins`` ({sheet name: {margin: inches}}) of the
    legacy file's. Returns how many sheets were given theirs (0: the file is untouched). Never raises for what the
    file holds."""
    margins = margins or {}
    wanted = {sheet: (printing.get(sheet, {}), {margin: inches for margin, inches in margins.get(sheet, {}).items()
                                                if 0.0 <= inches <= LARGEST_MARGIN})
              for sheet in {*printing, *margins}}
    if kind != "xls" or not wanted:
        return 0
    return sheet_objects.edit_sheets(result, wanted, _printed,
                                     "the sheets' print settings of %s stay as LibreOffice wrote them: %r")


def _printed(wanted: tuple[dict[str, str | None], dict[str, float]]) -> PartEdit:
    """The edit of a worksheet part that gives its ``pageSetup`` and ``pageMargins`` the attributes ``wanted``."""
    setup, margins = wanted

    def edit(tag: str, attributes: dict[str, str]) -> dict[str, str | None] | None:
        if tag == PAGE_SETUP:
            return {key: value for key, value in setup.items() if attributes.get(key) != value} or None
        if tag == PAGE_MARGINS:
            return {margin: f"{inches:.15g}" for margin, inches in margins.items()
                    if not _near(attributes.get(margin), inches)} or None
        return None

    return without_cells(lambda data, name: (ooxml.edit_tags(data, name, edit), 1))


def _near(written: str | None, inches: float) -> bool:
    try:
        return written is not None and abs(float(written) - inches) <= MARGIN_TOLERANCE
    except ValueError:
        return False
