"""How a workbook's sheets print, put back into the .xlsx where LibreOffice's model has no room for it.

A sheet's SETUP record says, besides the paper, whether its comments print as they show on the sheet or at the end,
whether it prints in black and white or as a draft, and how a cell's error prints (blank, a dash, #N/A).
LibreOffice knows "print comments" and nothing more. Its export writes ``cellComments="atEnd"`` for comments
printed as they show, ``blackAndWhite="false"`` and errors as shown. Of 685 workbooks of the corpus and POI's and
LibreOffice's tests, 49 sheets printed their comments where they show and 11 in black and white; one printed errors
blank.

``mend`` gives each such sheet's ``pageSetup`` the attributes the .xls has (``Inventory.printing``, from the pass
over its records) where LibreOffice wrote others. A sheet LibreOffice wrote no ``pageSetup`` for is left as it is,
and so is every other byte.
"""

from pathlib import Path

from docshift.engine import ooxml, sheet_objects
from docshift.engine.embedding import PartEdit
from docshift.engine.inventory.package import NS_S, SEP

PAGE_SETUP = f"{NS_S}{SEP}pageSetup"


def mend(result: Path, kind: str, printing: dict[str, dict[str, str]]) -> int:
    """Give the sheets of ``result`` (LibreOffice's export of an .xls) the ``printing`` settings ({sheet name:
    ``pageSetup``'s attributes}) of the legacy file's. Returns how many sheets were given theirs (0: the file is
    untouched). Never raises for what the file holds."""
    if kind != "xls" or not printing:
        return 0
    return sheet_objects.edit_sheets(result, printing, _printed,
                                     "the sheets' print settings of %s stay as LibreOffice wrote them: %r")


def _printed(wanted: dict[str, str]) -> PartEdit:
    """The edit of a worksheet part that gives its ``pageSetup`` the attributes ``wanted``."""
    return lambda data, name: (ooxml.edit_tags(data, name, lambda tag, attributes: {
        key: value for key, value in wanted.items() if attributes.get(key) != value} or None
        if tag == PAGE_SETUP else None), 1)
