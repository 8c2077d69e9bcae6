"""The persist directory of a "PowerPoint Document" stream ([MS-PPT] 2.1.2): Current User -> UserEditAtoms ->
PersistDirectoryAtoms, each mapping persist ids to the offsets of the live objects; rebuilt from all the stream's
PersistDirectoryAtoms when that chain is broken, as PowerPoint's repair does."""

import struct

from docshift.engine.inventory import officeart
from docshift.engine.inventory.common import Budget, Unreadable

RT_USER_EDIT, RT_PERSIST_DIRECTORY, RT_CURRENT_USER = 0x0FF5, 0x1772, 0x0FF6
MAX_USER_EDITS = 4096


def directory(current: bytes, doc: bytes, budget: Budget) -> tuple[int, dict[int, int], bool]:
    """(docPersistIdRef, {persist id: offset}, whether the chain of edits reaches the first save) of the live edit
    ([MS-PPT] 2.1.2)."""
    if len(current) < 20:
        raise Unreadable("no CurrentUserAtom")
    _, _, rec_type, _, _ = officeart.header(current, 0)
    token, offset = struct.unpack_from("<II", current, 12)
    if rec_type != RT_CURRENT_USER or token == 0xF3D1C4DF:
        raise Unreadable("no CurrentUserAtom, or encrypted")
    directory: dict[int, int] = {}
    doc_ref = None
    seen: set[int] = set()
    while offset and offset not in seen and len(seen) < MAX_USER_EDITS and offset + 8 <= len(doc):
        seen.add(offset)
        budget.spend()
        _, _, rec_type, body, stop = officeart.header(doc, offset)
        if rec_type != RT_USER_EDIT or stop - body < 28:
            break  # a damaged chain: what was read so far stands, rescan may fill in
        last_edit, persist_offset, edit_doc_ref = struct.unpack_from("<III", doc, body + 8)
        if doc_ref is None:
            doc_ref = edit_doc_ref
            if stop - body >= 32 and struct.unpack_from("<I", doc, body + 28)[0]:
                raise Unreadable("encrypted")
        if persist_offset + 8 <= len(doc):
            persist_entries(doc, persist_offset, directory, budget, newest_first=True)
        offset = last_edit
    if doc_ref is None:
        raise Unreadable("no UserEditAtom")
    return doc_ref, directory, offset == 0


def persist_entries(doc: bytes, offset: int, directory: dict[int, int], budget: Budget, newest_first: bool) -> None:
    """Add the entries of the PersistDirectoryAtom at ``offset`` to ``directory``."""
    _, _, rec_type, pos, end = officeart.header(doc, offset)
    if rec_type != RT_PERSIST_DIRECTORY:
        return
    end = min(end, len(doc))
    while pos + 4 <= end:
        word = struct.unpack_from("<I", doc, pos)[0]
        first, count = word & 0xFFFFF, min(word >> 20, (end - pos - 4) // 4)
        budget.spend(count)
        for index, object_offset in enumerate(struct.unpack_from(f"<{count}I", doc, pos + 4)):
            if newest_first:
                directory.setdefault(first + index, object_offset)
            else:
                directory[first + index] = object_offset
        pos += 4 + 4 * count


def rescan(doc: bytes, budget: Budget) -> dict[int, int]:
    """The persist directory rebuilt from every PersistDirectoryAtom of the stream, later ones winning: what
    PowerPoint's own repair does when the chain of UserEditAtoms is broken."""
    directory: dict[int, int] = {}
    for rec_type, _, _, body, _ in officeart.children(doc, 0, len(doc), budget):
        if rec_type == RT_PERSIST_DIRECTORY:
            persist_entries(doc, body - 8, directory, budget, newest_first=False)
    return directory
