"""The hyperlinks of an .xls's cells that LibreOffice drops, put back into the .xlsx as Excel writes them.

LibreOffice keeps a cell's hyperlink as a field in the cell's text, so a link on a cell that shows no text (an empty
cell, a cell of an empty string, most of a range whose first cell has the text) has nowhere to go: its import drops
it and the .xlsx has none. Excel keeps a link on any cell or range, in the sheet's ``hyperlinks``: a ``hyperlink``
with its ``ref``, a relationship to where it goes (``TargetMode="External"``) or the ``location`` in the workbook,
its ``display`` text and ``tooltip``. ``mend`` writes each link of the legacy file (``Inventory.links``, as xlrd
read them) whose cells meet no link of the result's sheet.
"""

import logging
import re
from pathlib import Path

from docshift.engine import ooxml, sheet_objects
from docshift.engine.embedding import ERRORS, MAX_EDITED_PART
from docshift.engine.inventory.common import Link
from docshift.engine.inventory.package import NS_R, Package
from docshift.engine.sheet_objects import cell_name

log = logging.getLogger("docshift.engine")

REF = re.compile(rb'<hyperlink\b[^>]*?\bref="([A-Z]{1,3})([0-9]{1,7})(?::([A-Z]{1,3})([0-9]{1,7}))?"')
# what comes after <hyperlinks> in CT_Worksheet's sequence
AFTER_LINKS = re.compile(rb"<(?:printOptions|pageMargins|pageSetup|headerFooter|rowBreaks|colBreaks|customProperties|"
                         rb"cellWatches|ignoredErrors|smartTags|drawing|legacyDrawing|legacyDrawingHF|drawingHF|"
                         rb"picture|oleObjects|controls|webPublishItems|tableParts|extLst)[\s/>]|</worksheet>")
HYPERLINK = "http://schemas.openxmlformats.org/officeDocument/2006/relationships/hyperlink"
Box = tuple[int, int, int, int]  # first row, last row, first column, last column (0-based)


def mend(result: Path, kind: str, links: dict[str, list[Link]]) -> int:
    """Put each hyperlink of ``links`` ({sheet name: the legacy file's links}) whose cells meet no hyperlink of its
    sheet in ``result`` (LibreOffice's export) into that sheet. Returns how many went in (0: the file is untouched).
    Never raises for what the file holds."""
    if kind != "xls" or not any(links.values()):
        return 0
    try:
        return sheet_objects.into_sheets(result, {name[:31]: found for name, found in links.items()}, _sheet)
    except ERRORS as error:
        log.warning("the hyperlinks of %s stay as LibreOffice wrote them: %r", result, error)
        return 0


def _sheet(package: Package, part: str, index: int, links: list[Link], lower: set[str], edits: dict[str, bytes],
           added: dict[str, tuple[bytes, str]]) -> int:
    """The ``links`` that the sheet ``part`` lacks written into it; how many."""
    data = ooxml.checked(ooxml.read(package.zip, package.names[part], MAX_EDITED_PART), part)
    written = [box_of(match) for match in REF.finditer(data)]
    lacking = [link for link in links if not any(meet(_of(link), box) for box in written)]
    if not lacking:
        return 0
    rels_part, rels = sheet_objects.rels_of(package, part)
    rid = sheet_objects.relationship_ids(rels)
    new_rels: list[tuple[str, ...]] = []
    elements = []
    for link in lacking:
        (first_row, last_row), (first_column, last_column) = link.rows, link.columns
        ref = f"{cell_name(first_row, first_column)}" + (
            f":{cell_name(last_row, last_column)}" if (first_row, first_column) != (last_row, last_column) else "")
        attributes = [f'ref="{ref}"']
        if link.target:
            new_rels.append((rid(), HYPERLINK, sheet_objects.escape(link.target), "External"))
            attributes.append(f'r:id="{new_rels[-1][0]}"')
        for name, value in (("location", link.location), ("tooltip", link.tip), ("display", link.display)):
            if value:
                attributes.append(f'{name}="{ooxml.attribute_value(value)}"')
        elements.append(f'<hyperlink xmlns:r="{NS_R}" ' + " ".join(attributes) + "/>")
    edits[part] = sheet_objects.append_to(data, "hyperlinks", AFTER_LINKS, elements)
    if new_rels:
        sheet_objects.add_relationships(package, rels_part, rels, new_rels, edits, added)
    return len(elements)


def _of(link: Link) -> Box:
    return (*link.rows, *link.columns)


def box_of(match: re.Match[bytes]) -> Box:
    """The cells a ref covers (a ``hyperlink``'s, a ``mergeCell``'s: ``match``'s groups its first cell's column
    letters and row, then its last cell's or none)."""
    first = (int(match.group(2)) - 1, _column(match.group(1)))
    last = (int(match.group(4)) - 1, _column(match.group(3))) if match.group(3) else first
    return first[0], last[0], first[1], last[1]


def _column(letters: bytes) -> int:
    number = 0
    for letter in letters:
        number = number * 26 + letter - 64
    return number - 1


def meet(one: Box, other: Box) -> bool:
    """Whether the cells ``one`` and ``other`` cover meet."""
    return not (one[1] < other[0] or other[1] < one[0] or one[3] < other[2] or other[3] < one[2])
