"""A table cell's margins, which LibreOffice's PPTX export writes where PowerPoint does not read them.

LibreOffice writes a cell's text insets on the cell's ``a:txBody/a:bodyPr`` (``lIns`` and the others) and, on
``a:tcPr``, only a left and right margin that is not zero. PowerPoint takes a cell's margins from ``a:tcPr`` alone
(``marL``, ``marR``, ``marT``, ``marB``) and, without them, its defaults of 0.1" and 0.05": a table whose cells had no
margins in the .ppt gets them, its text wraps in narrower cells and the table grows past its place (11 of 111 decks
of the corpus write such cells; in ``bug58733_671884.ppt`` the last column's header wraps and the table runs into the
footer). LibreOffice reads the margins from ``a:tcPr`` too. Each cell is given, on its ``a:tcPr``, each margin of its
``a:bodyPr`` that it lacks and that is not the default; everything else stays byte for byte.
"""

import re
from collections.abc import Iterator
from pathlib import Path

from docshift.engine import ooxml
from docshift.engine.embedding import PartEdit, edited
from docshift.engine.inventory.package import NS_A, SEP, Package

CELL, BODY, CELL_PROPERTIES = (f"{NS_A}{SEP}{local}" for local in ("tc", "bodyPr", "tcPr"))
# a cell's insets as its bodyPr names them: the margin of tcPr they are, and its default (EMU)
MARGINS = {"lIns": ("marL", 91440), "rIns": ("marR", 91440), "tIns": ("marT", 45720), "bIns": ("marB", 45720)}
SLIDE_PARTS = re.compile(r"ppt/(slides|slideLayouts|slideMasters)/[^/]+\.xml")


def mend(result: Path, kind: str) -> int:
    """Give the table cells of the .pptx ``result`` the margins PowerPoint reads. Returns how many cells changed (0:
    the file is untouched). Never raises for what the file holds."""
    if kind != "ppt":
        return 0

    def parts(package: Package) -> Iterator[tuple[str, PartEdit]]:
        for name in package.names:
            if SLIDE_PARTS.fullmatch(name) and package.holds(name, b"tcPr"):
                yield name, margins

    return edited(result, parts, "the table cells of %s stay as LibreOffice wrote them: %r")


def margins(data: bytes, name: str) -> tuple[bytes, int]:
    """(the slide part ``name`` (``data``) with each table cell's ``a:tcPr`` given the margins its ``a:bodyPr``
    has and it lacks, but the defaults; how many cells changed)."""
    insets: dict[str, str] | None = None  # of the cell being read, once its bodyPr is read
    given = 0

    def edit(tag: str, attributes: dict[str, str]) -> dict[str, str] | None:
        nonlocal insets, given
        if tag == CELL:
            insets = {}
        elif tag == BODY and insets == {}:
            insets = {margin: value for inset, (margin, default) in MARGINS.items()
                      if (value := attributes.get(inset, "")).isdigit() and int(value) != default}
        elif tag == CELL_PROPERTIES and insets is not None:
            wanted, insets = {margin: value for margin, value in insets.items() if margin not in attributes}, None
            if wanted:
                given += 1
                return wanted
        return None

    return ooxml.edit_tags(data, name, edit), given
