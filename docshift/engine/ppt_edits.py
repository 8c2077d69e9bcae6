"""A .ppt whose chain of saves is broken, relinked for LibreOffice.

PowerPoint saves a deck incrementally: each save appends its changed records, a PersistDirectoryAtom and a
UserEditAtom whose offsetLastEdit points at the save before, and the "Current User" stream points at the newest
([MS-PPT] 2.1.2). A deck whose chain does not reach the first save (a link that points at its own edit, as in
POI's bug 57272, or past the records) is one PowerPoint repairs as it opens it, but LibreOffice reads it as slides
without their text and pictures. The inventory reads such a deck through every PersistDirectoryAtom of the
stream (``inventory.ppt_persist.rescan``); LibreOffice gets a copy whose UserEditAtoms are linked in the order they
stand in the stream, each to the one before it, which is what they were saved as. The customer's file is left as it is
(``mended.copy`` writes the copy).
"""

import struct
from pathlib import Path

from docshift.engine.cfb import DUAL_STORAGE, CompoundFile
from docshift.engine.inventory import officeart
from docshift.engine.inventory.common import Budget
from docshift.engine.inventory.ppt_persist import RT_USER_EDIT

USER_EDIT_SIZE = 28
LAST_EDIT = 8 + 8  # offsetLastEdit: after the record header, lastSlideIdRef, version, minorVersion, majorVersion
CURRENT_EDIT = 16  # the CurrentUserAtom's offsetToCurrentEdit: after its header, size and headerToken


def relinked(source: Path) -> dict[str, bytes] | None:
    """The streams of the .ppt ``source`` that change once its UserEditAtoms are linked in stream order and
    "Current User" points at the newest one it names (or the last, if it names none); None where it holds no
    UserEditAtom."""
    with CompoundFile(source) as ole:
        document = bytearray(ole.openstream("PowerPoint Document").read())
        current = bytearray(ole.openstream("Current User").read())
        folder = f"{DUAL_STORAGE}/" if ole.dual else ""
    edits = [body - 8 for rec_type, _, _, body, stop in officeart.children(document, 0, len(document), Budget())
             if rec_type == RT_USER_EDIT and stop - body >= USER_EDIT_SIZE]
    if not edits or len(current) < CURRENT_EDIT + 4:
        return None
    newest = struct.unpack_from("<I", current, CURRENT_EDIT)[0]
    edits = edits[:edits.index(newest) + 1] if newest in edits else edits
    for before, edit in zip([0, *edits], edits, strict=False):
        struct.pack_into("<I", document, edit + LAST_EDIT, before)
    struct.pack_into("<I", current, CURRENT_EDIT, edits[-1])
    return {f"{folder}PowerPoint Document": bytes(document), f"{folder}Current User": bytes(current)}
