"""A .doc's default tab stops, put back into the .docx where LibreOffice writes others.

Word sets a tab character that passes a paragraph's own tab stops to the next default one, every ``dxaTab`` twips
(the DOP's, [MS-DOC] 2.7.2: 720, half an inch, unless the author changed it). LibreOffice's export writes
``w:defaultTabStop`` from its own default: 709 twips (1.25 cm) in 4 of 151 documents of POI's tests and the corpus
whose DOP says 720 or 284, a plain ``soffice`` too, so every default tab of those documents moved (by 11 twips a
stop, or from 0.2 to 0.49 inch).

``mend`` gives the result's ``w:defaultTabStop`` the DOP's interval where it differs, or writes it where the
settings have none (before the children CT_Settings puts after it). Every other byte stays as it was.
"""

import re
import struct
from pathlib import Path

from docshift.engine.cfb import CompoundFile
from docshift.engine.embedding import PartEdit, child_place, edited, guarded
from docshift.engine.inventory.common import stream
from docshift.engine.inventory.doc import _fib
from docshift.engine.inventory.package import NS_W, SEP, Package
from docshift.engine.word_schema import SETTINGS as SETTINGS_ORDER
from docshift.engine.word_template import settings_part

PAIR_DOP, DXA_TAB = 31, 10  # FibRgFcLcb97's fcDop; where the DOP keeps dxaTab
LARGEST = 31_680  # 22 inches: the widest page Word sets, in twips
DEFAULT_TAB_STOP = f"{NS_W}{SEP}defaultTabStop"
PRECEDING = frozenset(f"{NS_W}{SEP}{local}" for local in SETTINGS_ORDER[:SETTINGS_ORDER.index("defaultTabStop")])
WRITTEN = re.compile(rb'(<w:defaultTabStop\s+w:val=")([0-9]+)("\s*/>)')


def mend(result: Path, source: Path, kind: str) -> int:
    """Give ``result`` (LibreOffice's export of the .doc ``source``) the .doc's default tab stop interval. Returns 1
    where it did, else 0 (the file is untouched). Never raises for what the files hold."""
    if kind != "doc":
        return 0
    return guarded(_mend, result, source, "the default tab stops of %s stay as LibreOffice wrote them: %r")


def _mend(result: Path, source: Path) -> int:
    def parts(package: Package) -> list[tuple[str, PartEdit]]:
        settings = settings_part(package)
        interval = interval_of(source) if settings is not None else None
        if settings is None or interval is None:
            return []
        return [(settings, lambda data, name: _set(data, name, interval))]

    return edited(result, parts, "the default tab stops of %s stay as LibreOffice wrote them: %r", source)


def interval_of(source: Path) -> int | None:
    """The default tab stop interval of the .doc ``source`` in twips (None where its DOP gives none that fits a
    page)."""
    with CompoundFile(source) as ole:
        word = stream(ole, "WordDocument")
        if word is None:
            return None
        doc = _fib(word, lambda name: stream(ole, name))
    start, size = doc.pair(PAIR_DOP)
    if size < DXA_TAB + 2 or start + DXA_TAB + 2 > len(doc.table):
        return None
    interval = struct.unpack_from("<H", doc.table, start + DXA_TAB)[0]
    return interval if 0 < interval <= LARGEST else None


def _set(data: bytes, name: str, interval: int) -> tuple[bytes, int]:
    """The settings part with its default tab stop ``interval``: LibreOffice's element given the value, or one
    written where it has none."""
    written = WRITTEN.search(data)
    if written is not None:
        if int(written.group(2)) == interval:
            return data, 0
        return data[:written.start(2)] + b"%d" % interval + data[written.end(2):], 1
    present, at, _ = child_place(data, name, DEFAULT_TAB_STOP, (), PRECEDING)
    if present:  # written otherwise than LibreOffice writes it: left as it is
        return data, 0
    return data[:at] + f'<w:defaultTabStop xmlns:w="{NS_W}" w:val="{interval}"/>'.encode() + data[at:], 1
