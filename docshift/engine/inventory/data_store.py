"""The custom XML parts a legacy file keeps in its data store, which LibreOffice's imports do not read.

Office 2007 and later, saving a .doc, .xls or .ppt, keep the document's custom XML parts in the storage MsoDataStore
([MS-OSHARED] 2.3.6): a storage for each part, whose Item stream is the part's XML and whose Properties stream its
properties (``ds:datastoreItem``: its id and the schemas it follows). They hold a document's bibliography sources
(Word's "Manage Sources" list), a SharePoint library's content type and the values of its columns, and the data of
content controls and add-ins. ``engine/custom_xml.py`` puts them into the result.
"""

from typing import Any

from docshift.engine import ooxml
from docshift.engine.inventory.common import Unreadable

STORAGE, ITEM, PROPERTIES = "MsoDataStore", "Item", "Properties"
MAX_PART = 4 << 20  # bytes of one part; Office's are some hundred bytes to tens of kilobytes
MAX_PARTS = 64  # parts of one file


def read(ole: Any) -> list[tuple[bytes, bytes | None]]:
    """(the XML, its properties' XML or None) of each custom XML part in the data store of an OLE file
    (``olefile.OleFileIO``), in the order of its storages' names; a part whose XML is no well-formed XML, or larger
    than ``MAX_PART``, is left out, and so are properties that are not. Never raises."""
    try:
        storages = sorted({entry[1] for entry in ole.listdir(streams=True, storages=False)
                           if len(entry) == 3 and entry[0] == STORAGE})
    except Exception:  # a directory that does not list
        return []
    found = []
    for storage in storages[:MAX_PARTS]:
        item = _xml(ole, [STORAGE, storage, ITEM])
        if item is not None:
            found.append((item, _xml(ole, [STORAGE, storage, PROPERTIES])))
    return found


def _xml(ole: Any, path: list[str]) -> bytes | None:
    """The stream at ``path`` where it is well-formed XML within ``MAX_PART``; None otherwise."""
    try:
        if not ole.exists("/".join(path)) or ole.get_size("/".join(path)) > MAX_PART:
            return None
        with ole.openstream(path) as opened:
            data = bytes(opened.read(MAX_PART))
        return ooxml.checked(data, "/".join(path))
    except (Unreadable, ooxml.Unreadable, OSError, ValueError):
        return None
