"""A deck's "don't show on title slide" and right-to-left flags (``docshift/engine/presentation_flags.py``): the
.ppt's DocumentAtom's fOmitTitlePlace and fRightToLeft, which LibreOffice drops, on the result's presentation.

Made here: the session's deck saved by LibreOffice as a .ppt, its DocumentAtom given both flags as PowerPoint sets
them.
"""

import re
import shutil
import struct
import zipfile

import olefile
from conftest import _soffice_save as soffice

from docshift.engine import convert, presentation_flags
from docshift.engine.inventory import of_source

DOCUMENT_ATOM = struct.pack("<HHI", 0x0001, 0x03E9, 40)  # recVer 1, RT_DocumentAtom, 40 bytes


def flagged(source, path):
    """A copy of the .ppt ``source`` at ``path`` whose DocumentAtom omits footers on title slides and reads right
    to left."""
    shutil.copy(source, path)
    with olefile.OleFileIO(str(path), write_mode=True) as ole:
        data = bytearray(ole.openstream("PowerPoint Document").read())
        at = data.index(DOCUMENT_ATOM) + 8
        assert data[at + 37] == data[at + 38] == 0
        data[at + 37] = data[at + 38] = 1
        ole.write_stream("PowerPoint Document", bytes(data))
    return path


def presentation(path):
    with zipfile.ZipFile(path) as package:
        return re.search(r"<p:presentation\b[^>]*>", package.read("ppt/presentation.xml").decode()).group()


def test_the_flags_are_read(legacy, tmp_path):
    assert of_source(legacy["ppt"], "ppt").presentation == {}
    assert of_source(flagged(legacy["ppt"], tmp_path / "deck.ppt"), "ppt").presentation == {
        "showSpecialPlsOnTitleSld": "0", "rtl": "1"}


def test_the_presentation_keeps_its_flags(office, legacy, tmp_path):
    """A plain soffice writes neither flag; docshift both, the rest of the part as LibreOffice wrote it."""
    source = flagged(legacy["ppt"], tmp_path / "deck.ppt")
    plain = presentation(soffice(source, "pptx", tmp_path / "plain"))
    assert "showSpecialPlsOnTitleSld" not in plain and "rtl" not in plain
    converted = convert.convert(office, source, "ppt", tmp_path / "work", 60)
    written = presentation(converted.path)
    assert written == plain[:-1] + ' showSpecialPlsOnTitleSld="0" rtl="1">'
    assert converted.fidelity["complete"] is True, converted.fidelity["lost"]


def test_a_deck_without_them_is_untouched(legacy, tmp_path):
    result = soffice(legacy["ppt"], "pptx", tmp_path)
    before = result.read_bytes()
    assert presentation_flags.mend(result, "ppt", {}) == 0 and presentation_flags.mend(result, "doc", {"rtl": "1"}) == 0
    assert result.read_bytes() == before
    assert presentation_flags.mend(result, "ppt", {"rtl": "1"}) == 1 and 'rtl="1"' in presentation(result)
