"""A deck's "don't show on title slide" and right-to-left flags, put back into the .pptx where LibreOffice drops them.

PowerPoint's Header and Footer dialog has "Don't show on title slide": a deck's date, slide number and footer stay
off the slides of a title layout. A deck made for Arabic or Hebrew lays out right to left. The .ppt keeps both in
its DocumentAtom (fOmitTitlePlace, fRightToLeft: [MS-PPT] 2.4.2). LibreOffice's import reads neither, and its export
writes the presentation without them (a plain ``soffice`` too): in PowerPoint the dialog's box came out unticked,
so a footer applied to all slides showed on the title slide too, and the deck's slide list ran left to right. 7
decks of the corpus and POI's have the first flag, one the second.

``mend`` gives the result's ``presentation`` element ``showSpecialPlsOnTitleSld="0"`` and ``rtl="1"`` where the
.ppt says so (``Inventory.presentation``, read with its counts); the rest of the part stays byte for byte.
"""

from pathlib import Path

from docshift.engine.embedding import attributes_given
from docshift.engine.inventory.package import NS_P, SEP

PRESENTATION = f"{NS_P}{SEP}presentation"
MAIN = "ppt/presentation.xml"


def mend(result: Path, kind: str, flags: dict[str, str]) -> int:
    """Give the presentation of ``result`` (LibreOffice's export of a .ppt) the attributes ``flags`` (its
    DocumentAtom's, as OOXML names them). Returns 1 where they went in, else 0 (the file is untouched). Never raises
    for what the file holds."""
    if kind != "ppt" or not flags:
        return 0
    return attributes_given(result, MAIN, PRESENTATION, flags,
                            "the presentation's flags of %s stay as LibreOffice wrote them: %r")
