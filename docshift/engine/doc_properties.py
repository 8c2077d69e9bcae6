"""What a legacy file says of itself that LibreOffice drops: its company, its manager and its category.

Word, Excel and PowerPoint keep a file's properties in two property-set streams: SummaryInformation (title, author,
subject, keywords, ...) and DocumentSummaryInformation (company, manager, category, ...). LibreOffice's import reads
the first and, of the second, none of those three, so that its OOXML export, a plain ``soffice`` included, writes
neither ``Company`` nor ``Manager`` into ``docProps/app.xml`` and no ``cp:category`` into ``docProps/core.xml``. Of
the corpus's 230 files that convert, 104 name one or more (106 in all); Office shows them on the file's properties,
and search and document management index them.

``inventory.properties.read`` takes them from the legacy file's DocumentSummaryInformation ([MS-OLEPS]; its strings
in the property set's code page), ``mend`` writes each that the result lacks as the first child of its part's root
(both parts' schemas take their children in any order). Every other byte stays as LibreOffice wrote it.
"""

from pathlib import Path
from xml.sax.saxutils import escape

from docshift.engine import ooxml
from docshift.engine.embedding import edited
from docshift.engine.inventory.common import Unreadable
from docshift.engine.inventory.properties import PROPERTIES

NAMESPACES = {"docProps/core.xml": "http://schemas.openxmlformats.org/package/2006/metadata/core-properties",
              "docProps/app.xml": "http://schemas.openxmlformats.org/officeDocument/2006/extended-properties"}



def mend(result: Path, properties: dict[int, str]) -> int:
    """Give ``result`` each of ``properties`` (``Inventory.properties``) that its ``docProps`` parts lack. Returns how
    many went in (0: the file is untouched). Never raises for what the file holds."""
    if not properties:
        return 0
    by_part: dict[str, dict[str, str]] = {}
    for key, text in properties.items():
        part, element = PROPERTIES[key]
        by_part.setdefault(part, {})[element] = text
    return edited(result, lambda package: [(part, lambda data, name: _given(data, name, by_part[name]))
                                           for part in by_part if part in package.names],
                  "the company, manager and category of %s stay out: %r")


def _given(data: bytes, name: str, elements: dict[str, str]) -> tuple[bytes, int]:
    """(the part ``name`` (``data``) with each of ``elements`` ({local name: text}) it lacks as the first child of its
    root, in the root's prefix for the part's namespace; how many went in)."""
    found: dict[str, int] = {}
    namespace = NAMESPACES[name]

    def start(tag: str, _: dict[str, str]) -> None:
        found.setdefault("root", reader.CurrentByteIndex)
        space, local = tag.rpartition(ooxml.SEPARATOR)[::2]
        if space == namespace:
            found[local] = reader.CurrentByteIndex

    reader = ooxml.parser(name, Unreadable, start)
    ooxml.feed(reader, (data,), name, Unreadable)
    root = ooxml.start_tag(data, found["root"], name)
    if root[1].group().endswith(b"/>") or not root[0].decode().endswith("Properties"):
        return data, 0  # an empty or foreign root: nothing is put into it
    prefix = ooxml.prefix(data, found["root"], name)
    missing = {local: text for local, text in elements.items() if local not in found}
    added = "".join(f"<{prefix}{local}>{escape(text, ooxml.TEXT_REFERENCES)}</{prefix}{local}>"
                    for local, text in missing.items())
    at = root[1].end()
    return data[:at] + added.encode() + data[at:], len(missing)
