"""The colours and fonts of a workbook's theme, which LibreOffice writes as its own theme's, put back into the .xlsx.

An .xls that Excel 2007 or later saved holds its theme in the THEME record ([MS-XLS] 2.4.326): an Office default
theme by number, or the theme's own package. Excel draws with the theme's colours what names them: a table's style,
a chart's or a shape's default colours, a cell style such as "Accent1", its colour picker's first rows; and it offers
the theme's headings and body fonts first in its font picker, and gives them to new shapes and charts. LibreOffice
25.2 reads no THEME record, and its .xlsx export writes its own theme, "LibreOffice", whose first accent is green
(18A303) where Office's is blue (4F81BD or another), and whose fonts are Arial: a plain ``soffice``'s result, and a
table docshift writes back (``sheet_list_tables``), show LibreOffice's colours where Excel shows the workbook's. Of
787 workbooks of the corpus, POI's tests and unseen sets 25-31, 311 have a THEME record.

``mend`` gives the result's theme part the workbook's colour scheme (``slide_schemes.recoloured``) and its headings'
and body's Latin and East Asian fonts where the theme names them (``slide_schemes.refonted``): those of the package,
or of Office 2007's, 2013's or 2016's default theme (``sheet_colours.DEFAULT_THEMES``). A workbook under a default
theme of another version, or with no THEME record, keeps LibreOffice's. Every other byte of the part, and every
other part, stays as LibreOffice wrote it.
"""

from collections.abc import Iterator
from pathlib import Path

from docshift.engine import ooxml
from docshift.engine.embedding import PartEdit, edited
from docshift.engine.inventory.package import Package
from docshift.engine.sheet_colours import workbook_theme
from docshift.engine.slide_schemes import recoloured, refonted

THEME_RELATIONSHIP = f"{ooxml.RELATIONSHIPS}/theme"


def mend(result: Path, source: Path, kind: str) -> int:
    """Give the theme of ``result`` (LibreOffice's export of the .xls ``source``) the workbook's colours and fonts.
    Returns 1 where it did (0: the file is untouched). Never raises for what the files hold."""
    if kind != "xls":
        return 0

    def parts(package: Package) -> Iterator[tuple[str, PartEdit]]:
        palette = workbook_theme(source)
        theme = package.related("xl/workbook.xml", THEME_RELATIONSHIP) if palette is not None else None
        if palette is not None and theme is not None:
            yield theme, lambda data, name: (
                written := refonted(recoloured(data, name, palette), name, palette.fonts), int(written != data))

    return edited(result, parts, "the theme of %s stays LibreOffice's: %r", source)
