"""The headers and footers of a .doc's continuous sections, carried through LibreOffice.

Word shows a section's headers and footers on the pages that begin in it, and a continuous section (one that goes on
on the page where the section before it ends) has headers and footers of its own like any other. LibreOffice 25.2's
.doc import keeps headers only in page styles, which change only where a page does: it loads a continuous section as
a section of the text and drops its own headers and footers, and with them its header and footer margins (3 of 441
.doc files read here: a guide's running title and its "Page n" footer on every page but the first).

The mended copy (``mended.py``) is the .doc with those sections' break codes (``sprmSBkc``) set from "continuous" to
"new page": LibreOffice then gives each of them a page style holding its headers, footers and margins, and writes them
into the .docx as that section's own. ``restore`` gives each such section of the .docx its continuous start again
(``w:type``), so that Word lays the pages out as it laid out the .doc, the headers and footers on the pages that
begin in the section. It does so only where the .docx's sections are the .doc's, one for one; otherwise the copy's
result is not used and the first one stands, its report naming the headers and footers it lacks.
"""

import zipfile
from collections.abc import Collection, Mapping
from pathlib import Path

from docshift.engine import ooxml
from docshift.engine.cfb import CompoundFile
from docshift.engine.embedding import MAX_EDITED_PART
from docshift.engine.inventory.doc import BREAK_CONTINUOUS
from docshift.engine.inventory.package import NS_W, SEP

BREAK_NEW_PAGE = 2
MAIN = "word/document.xml"
SECTION, SECTION_TYPE, SECTION_CHANGE = f"{NS_W}{SEP}sectPr", f"{NS_W}{SEP}type", f"{NS_W}{SEP}sectPrChange"
VALUE = f"{NS_W}{SEP}val"


def paged(source: Path, breaks: Mapping[int, int]) -> dict[str, bytes] | None:
    """The WordDocument stream of the .doc ``source`` with the break codes at ``breaks`` ({section: offset}, from
    its inventory) set to "new page"; None where one of them is not a continuous break."""
    with CompoundFile(source) as ole:
        word = bytearray(ole.openstream("WordDocument").read())
    for at in breaks.values():
        if at >= len(word) or word[at] != BREAK_CONTINUOUS:
            return None
        word[at] = BREAK_NEW_PAGE
    return {"WordDocument": bytes(word)}


def restore(result: Path, sections: int, breaks: Collection[int]) -> bool:
    """Whether the .docx ``result`` of the paged copy has each section in ``breaks`` continuous again, as in the
    .doc; it is left as it was, and this answers False, where it does not hold the .doc's ``sections`` one for one,
    or one of ``breaks`` does not start a new page in it, or a section's change is tracked."""
    found = {"sections": 0, "typed": 0, "changes": 0}

    def edit(tag: str, attributes: dict[str, str]) -> dict[str, str | None] | None:
        if tag == SECTION:
            found["sections"] += 1
        elif tag == SECTION_CHANGE:
            found["changes"] += 1
        elif tag == SECTION_TYPE and found["sections"] - 1 in breaks and attributes.get(VALUE) == "nextPage":
            found["typed"] += 1
            return {"w:val": "continuous"}
        return None

    with zipfile.ZipFile(result) as package:
        info = package.getinfo(MAIN)
        if info.file_size > MAX_EDITED_PART:
            return False
        edited = ooxml.edit_tags(ooxml.read(package, info, MAX_EDITED_PART), MAIN, edit)
        if found["sections"] != sections or found["typed"] != len(breaks) or found["changes"]:
            return False
        ooxml.rewrite(package, result, {MAIN: edited})
    return True
