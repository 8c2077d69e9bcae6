"""What a legacy file says of itself that LibreOffice drops: its company, manager and category, and an Excel 95
workbook's title, subject, author, keywords, comments and last author.

Word, Excel and PowerPoint keep a file's properties in two property-set streams: SummaryInformation (title, author,
subject, keywords, ...) and DocumentSummaryInformation (company, manager, category, ...). LibreOffice's import reads
the first and, of the second, none of those three, so that its OOXML export, a plain ``soffice`` included, writes
neither ``Company`` nor ``Manager`` into ``docProps/app.xml`` and no ``cp:category`` into ``docProps/core.xml``. Of
the corpus's 230 files that convert, 104 name one or more (106 in all); Office shows them on the file's properties,
and search and document management index them. Its Excel 95 import reads neither stream: the result's title,
subject, author, keywords, comments and last author are written empty (7 of unseen set 29's 47 workbooks).

``inventory.properties.read`` takes them from the legacy file's property sets ([MS-OLEPS]; their strings in each
set's code page), ``mend`` writes each that the result lacks as the first child of its part's root (both parts'
schemas take their children in any order), or into the element LibreOffice wrote empty. Every other byte stays as
LibreOffice wrote it.
"""

import re
from pathlib import Path
from xml.sax.saxutils import escape

from docshift.engine import ooxml
from docshift.engine.embedding import edited, spliced
from docshift.engine.inventory.common import Unreadable
from docshift.engine.inventory.properties import PROPERTIES

ROOTS = {"docProps/core.xml": "coreProperties", "docProps/app.xml": "Properties"}
DECLARATION = re.compile(rb"""xmlns(?::([\w.-]+))?\s*=\s*["']([^"']*)["']""")
EMPTY = re.compile(rb"<[^>]*>\s*</[^>]*>|<[^>]*/>")  # an element holding nothing


def mend(result: Path, properties: dict[str, str]) -> int:
    """Give ``result`` each of ``properties`` (``Inventory.properties``) that its ``docProps`` parts lack or hold
    empty. Returns how many went in (0: the file is untouched). Never raises for what the file holds."""
    if not properties:
        return 0
    by_part: dict[str, dict[tuple[str, str], str]] = {}
    for element, text in properties.items():
        part, namespace = PROPERTIES[element]
        by_part.setdefault(part, {})[namespace, element] = text
    return edited(result, lambda package: [(part, lambda data, name: _given(data, name, by_part[name]))
                                           for part in by_part if part in package.names],
                  "the properties of %s stay as LibreOffice wrote them: %r")


def _given(data: bytes, name: str, elements: dict[tuple[str, str], str]) -> tuple[bytes, int]:
    """(the part ``name`` (``data``) with each of ``elements`` ({(namespace, local name): text}) it lacks as the
    first child of its root, in the prefix the root declares for its namespace, and each it holds empty given its
    text; how many went in)."""
    found: dict[tuple[str, str], tuple[int, int]] = {}  # each child of the root: where it starts, where it ends
    depth, at, root_at = [0], [-1], [-1]

    def start(tag: str, _: dict[str, str]) -> None:
        depth[0] += 1
        if depth[0] == 1:
            root_at[0] = reader.CurrentByteIndex
        elif depth[0] == 2:
            at[0] = reader.CurrentByteIndex

    def end(tag: str) -> None:
        if depth[0] == 2:
            space, local = tag.rpartition(ooxml.SEPARATOR)[::2]
            found.setdefault((space, local), (at[0], ooxml.element_end(data, at[0], reader.CurrentByteIndex, name)))
        depth[0] -= 1

    reader = ooxml.parser(name, Unreadable, start, end)
    ooxml.feed(reader, (data,), name, Unreadable)
    if root_at[0] < 0:
        return data, 0
    root = ooxml.start_tag(data, root_at[0], name)
    if root[1].group().endswith(b"/>") or not root[0].decode().endswith(ROOTS[name]):
        return data, 0  # an empty or foreign root: nothing is put into it
    edits = []
    for (namespace, local), text in elements.items():
        where = found.get((namespace, local))
        if where is not None and EMPTY.fullmatch(data, where[0], where[1]):
            edits.append((where[0], where[1], _element(root, namespace, local, text)))
        elif where is None:
            edits.append((root[1].end(), root[1].end(), _element(root, namespace, local, text)))
    return spliced(data, edits), len(edits)


def _element(root: tuple[bytes, re.Match[bytes], list[re.Match[bytes]]], namespace: str, local: str,
             text: str) -> bytes:
    """The element ``local`` of ``namespace`` holding ``text``, in the prefix the ``root`` start tag declares for the
    namespace (declared on the element where the root does not)."""
    declared = {match.group(2).decode(): (match.group(1) or b"").decode() for match in (
        DECLARATION.fullmatch(attribute.group().strip()) for attribute in root[2]) if match}
    if namespace in declared:
        prefix, declaration = declared[namespace], ""
    else:
        prefix, declaration = "p", f' xmlns:p="{namespace}"'
    tag = f"{prefix}:{local}" if prefix else local
    return f"<{tag}{declaration}>{escape(text, ooxml.TEXT_REFERENCES)}</{tag}>".encode()
