"""Worksheet and workbook parts edited without their bulk: for the mends whose elements lie around it, not in it.

A sheet's code name, views, outline settings, validations, conditional formats, errors to ignore and print settings
are children of ``worksheet`` before or after ``sheetData``, and a sheet's cells are almost all of its bytes: a
mend that parsed a 4 MB sheet for its page setup spent nearly all of its time in the rows. A workbook's code name
and the sheet it opens on come before its defined names, of which a workbook of the corpus has 5,586 (669 KB).
``without_cells`` and ``without_names`` give such an edit the part with the content of its ``sheetData`` or its
``definedNames`` taken out, and put that content back into what the edit wrote, where the element still is. An
edit that does not leave the element's one end tag gets the whole part instead.
"""

import re

from docshift.engine import ooxml
from docshift.engine.embedding import PartEdit


def _start_tag(local: bytes) -> re.Pattern[bytes]:
    """The start tag of an element named ``local`` (1: its qualified name; 2: "/" where it is empty)."""
    return re.compile(rb"<((?:[A-Za-z_][\w.-]*:)?" + local + rb")(?=[\s/>])" + ooxml.IN_TAG + rb"*?(/?)>")


# nothing before these in their parts (a worksheet's sheetPr, dimension, sheetViews, sheetFormatPr and cols; a
# workbook's fileVersion, workbookPr, bookViews, sheets and external references) holds text
SHEET_DATA, DEFINED_NAMES = _start_tag(b"sheetData"), _start_tag(b"definedNames")


def without_cells(edit: PartEdit) -> PartEdit:
    """``edit`` of a worksheet part, made on the part without the content of its ``sheetData`` (rows and cells),
    which goes back as it was."""
    return _without(SHEET_DATA, edit)


def without_names(edit: PartEdit) -> PartEdit:
    """``edit`` of a workbook part, made on the part without the content of its ``definedNames``, which goes back
    as it was."""
    return _without(DEFINED_NAMES, edit)


def _without(element: re.Pattern[bytes], edit: PartEdit) -> PartEdit:
    def apart(data: bytes, name: str) -> tuple[bytes, int]:
        start = element.search(data)
        if start is None or start.group(2):
            return edit(data, name)
        end_tag = b"</" + start.group(1) + b">"
        close = data.find(end_tag, start.end())
        if close <= start.end():
            return edit(data, name)
        edited, count = edit(data[:start.end()] + data[close:], name)
        if edited.count(end_tag) != 1:
            return edit(data, name)
        at = edited.index(end_tag)
        return edited[:at] + data[start.end():close] + edited[at:], count

    return apart
