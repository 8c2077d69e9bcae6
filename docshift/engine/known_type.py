"""The LibreOffice type of a legacy file that is certainly Office 97-2003's binary format of its kind, found here so
that its child need not ask LibreOffice's deep type detection.

A child detects the type of every file before it loads it with the filter detection chose (``uno/bridge.py``):
3 ms of a small file's 45-55, a step a plain ``soffice`` takes inside its load. Most uploads are what their name
says, in the format every Office since 97 writes. For those, the type and its import filter are known from the
file's first records: a text's File Information Block (Word 97's wIdent; Word 6 and 95 write others), a workbook's
BOF (BIFF8, the workbook globals), a deck's Current User atom (PowerPoint 97's header token, plain or encrypted).
The filter is the one detection chooses, so the load, and what it makes of the file, are the same.

Detection still decides every other file: Word 95 and older, Excel 95 and older, PowerPoint 95, other formats under
a legacy name, and any damaged compound file. LibreOffice's reader gives up on a compound file one of whose streams
does not read whole, or whose chains cross, and its detection then takes the file for text (``mended.damaged``); so
only a file whose every stream reads whole gets a type here. Over 2,748 legacy files (the corpus's and packages'
tests), LibreOffice's deep detection named the type given here for each of the 2,368 given one.

Reading every stream takes about 2.5 ms a MB, so a file over ``LARGEST`` goes to detection without it.
"""

import struct
from pathlib import Path

from docshift.engine import mended
from docshift.formats import FORMATS

LARGEST = 512 * 1024  # bytes: past this, reading its streams costs more than the detection it spares
WORD_97_IDENT = 0xA5EC
BIFF_BOF, BIFF8, WORKBOOK_GLOBALS = 0x0809, 0x0600, 0x0005
CURRENT_USER_ATOM, CURRENT_USER_SIZE = 0x0FF6, 0x14
PPT_TOKENS = (0xE391C05F, 0xF3D1C4DF)  # a Current User atom's header token: unencrypted, encrypted
# each kind's 97-2003 type, as LibreOffice's TypeDetection names it, and its import filter (``formats.py``)
TYPES = {kind: (name, FORMATS[kind].legacy_filter) for kind, name in (
    ("doc", "writer_MS_Word_97"), ("xls", "calc_MS_Excel_97"), ("ppt", "impress_MS_PowerPoint_97"))}


def of(path: Path, kind: str) -> tuple[str, str] | None:
    """(LibreOffice's type name, its import filter) of ``path``, a legacy file of ``kind``, where it is certainly
    that kind's 97-2003 binary format and reads whole; None where LibreOffice's deep detection must decide."""
    try:
        if kind not in TYPES or path.stat().st_size > LARGEST:
            return None
    except OSError:
        return None
    read = mended.readable(path)
    if read is None or read[2]:
        return None
    streams = {entry.name.lower(): entry.data for entry in read[0].children if entry.data is not None}
    return TYPES[kind] if _of_97(kind, streams) else None


def _of_97(kind: str, streams: dict[str, bytes]) -> bool:
    if kind == "doc":
        head = streams.get("worddocument", b"")
        return len(head) >= 2 and struct.unpack_from("<H", head)[0] == WORD_97_IDENT
    if kind == "xls":
        head = streams.get("workbook", b"")
        if len(head) < 8:
            return False
        record, _, version, part = struct.unpack_from("<HHHH", head)
        return (record, version, part) == (BIFF_BOF, BIFF8, WORKBOOK_GLOBALS)
    user = streams.get("current user", b"")
    if "powerpoint document" not in streams or len(user) < 16:
        return False
    _, record, _, size, token = struct.unpack_from("<HHIII", user)
    return record == CURRENT_USER_ATOM and size == CURRENT_USER_SIZE and token in PPT_TOKENS
