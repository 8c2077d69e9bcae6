"""How a workbook calculates, put back into the .xlsx where LibreOffice's import forgets it.

A workbook whose author set calculation to manual (a large model that takes minutes to calculate), or to automatic
but for data tables, keeps it in each sheet's CALCMODE record; one shown with R1C1 references in REFMODE. Excel takes
both from the workbook it opens first. LibreOffice's import reads neither (its ODF says AutoCalculate), and its
export writes ``calcPr`` automatic with A1 references: of 685 workbooks of the corpus and POI's and LibreOffice's
tests, 6 calculated by hand and 3 showed R1C1, and in Excel their results recalculate on every edit and show A1.

``mend`` gives the result's ``calcPr`` the ``calcMode`` and ``refMode`` the .xls has (``Inventory.calculation``,
read in the pass over its records), where they are not Excel's default; the rest of the part stays byte for byte.
"""

from pathlib import Path

from docshift.engine.embedding import attributes_given
from docshift.engine.inventory.package import NS_S, SEP

CALCULATION = f"{NS_S}{SEP}calcPr"
MAIN = "xl/workbook.xml"


def mend(result: Path, kind: str, calculation: dict[str, str]) -> int:
    """Give ``result`` (LibreOffice's export of an .xls) the ``calculation`` settings of the .xls (``calcPr``'s
    attributes). Returns 1 where they went in, else 0 (the file is untouched). Never raises for what the file
    holds."""
    if kind != "xls" or not calculation:
        return 0
    return attributes_given(result, MAIN, CALCULATION, calculation,
                            "the calculation settings of %s stay as LibreOffice wrote them: %r")
