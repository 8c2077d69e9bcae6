"""The counts of an RTF file named .doc (Word opens one so, and LibreOffice's type detection takes it for a text
document): the pictures it shows, its embedded objects and its comments, read from its groups ([MS-RTF]).

An RTF file is groups (``{`` ... ``}``) of control words (``\\word`` with an optional number), control symbols and
text. A group whose first control word is a destination holds that destination's content; ``\\*`` marks one a
reader may skip. What is counted, as ``doc.py`` counts a Word 97 file and ``docx.py`` its result:

- ``images``: the ``\\pict`` groups that show, wherever they are: the text, tables, notes, comments and shapes (a
  shape's picture or picture fill is a ``\\pict`` in its properties), and the distinct ones (by their data) of the
  headers and footers. RTF keeps no store of distinct pictures, and a picture shown twice may be written twice with
  other bytes (Word writes a PICT's frame with it): each one counts, and the result's are counted the same way
  (``Inventory.placed_pictures``); a header's are told apart, as LibreOffice writes one header in several parts. Not
  counted: the renderings kept for readers that know no shapes or no newer pictures (``\\shprslt``,
  ``\\nonshppict``), an object's preview (``\\result`` of an ``\\object``) and a list's picture bullets
  (``\\listpicture``).
- ``embedded_objects``: ``\\object`` groups of an embedded object (``\\objemb``); linked ones and ActiveX
  controls are not.
- ``comments``: ``\\annotation`` destinations.

The text and the headers and footers stay unknown: what an RTF reader shows of them (fields, hidden text, the
headers a section's settings put in effect) is not read here. Binary data (``\\bin``) is stepped over by its length.
"""

import hashlib
import re
from pathlib import Path
from typing import Any

from docshift.engine.inventory.common import MAX_STREAM, Budget, Inventory, Unreadable

SIGNATURE = b"{\\rtf"
TOKEN = re.compile(rb"\\([a-zA-Z]{1,32})(-?[0-9]{1,10})? ?|\\'[0-9a-fA-F]{2}|\\[^a-zA-Z]|[{}]|[^\\{}]+")
# the groups whose pictures show nowhere a reader of shapes and newer pictures looks
NOT_SHOWN = {b"shprslt", b"nonshppict", b"listpicture"}
HEADERS = {b"header", b"headerl", b"headerr", b"headerf", b"footer", b"footerl", b"footerr", b"footerf"}
BUDGET_EVERY = 64  # tokens per record of the budget
# groups open at once, at most: Word nests a few dozen (tables in tables, fields, shapes); a file of nothing but
# "{" held 480 MB of the worker for 3 s before this bound
MAX_NESTING = 1024


def is_rtf(path: str | Path) -> bool:
    with open(path, "rb") as f:
        return f.read(len(SIGNATURE)) == SIGNATURE


def read(path: str | Path, inventory: Inventory, budget: Budget) -> None:
    """The counts of the RTF file ``path``; what cannot be read stays unknown."""
    with open(path, "rb") as f:
        data = f.read(MAX_STREAM + 1)
    if len(data) > MAX_STREAM:
        raise Unreadable("RTF file too large")
    pictures, objects, comments = _walk(data, budget)
    inventory.counts.update(images=pictures, embedded_objects=objects, comments=comments)
    inventory.placed_pictures = pictures


def _walk(data: bytes, budget: Budget) -> tuple[int, int, int]:
    """The pictures shown, the embedded objects and the comments of ``data``."""
    placed = objects = comments = 0
    in_headers: set[bytes] = set()  # the digests of the headers' and footers' pictures
    # each open group: [its first control word, whether its pictures show, whether it is in a header or footer,
    # the digest of its data (a header's picture)]
    stack: list[list[Any]] = []
    first = False  # the next control word is the first of the group just opened
    pos, tokens = 0, 0
    while pos < len(data):
        match = TOKEN.match(data, pos)
        if match is None:  # a lone backslash at the end
            break
        pos = match.end()
        tokens += 1
        if tokens % BUDGET_EVERY == 0:
            budget.spend()
        token = match.group()
        if token == b"{":
            if len(stack) >= MAX_NESTING:
                raise Unreadable("RTF groups nested too deep")
            stack.append([b"", stack[-1][1], stack[-1][2], None] if stack else [b"", True, False, None])
            first = True
            continue
        if token == b"}":
            if stack:
                name, shown, header, digest = stack.pop()
                if name == b"pict" and shown:
                    if header:
                        in_headers.add(digest.digest())
                    else:
                        placed += 1
            first = False
            continue
        word = match.group(1)
        if word is None:
            # a line end is no text of RTF's: a group's first control word may follow one
            if token != b"\\*" and token.strip(b"\r\n"):
                first = False
                if stack and stack[-1][3] is not None:  # a header's picture's hex data
                    stack[-1][3].update(b"".join(token.split()).lower())
            continue
        if word == b"bin":  # that many bytes of binary data follow
            length = max(0, int(match.group(2) or 0))
            if stack and stack[-1][3] is not None:
                stack[-1][3].update(data[pos:pos + length])
            pos += length
            continue
        if not stack:
            continue
        group = stack[-1]
        if first:
            first = False
            group[0] = word
            if word in NOT_SHOWN or (word == b"result" and len(stack) > 1 and stack[-2][0] == b"object"):
                group[1] = False
            elif word in HEADERS:
                group[2] = True
            elif word == b"pict" and group[2]:
                group[3] = hashlib.sha256()
            elif word == b"annotation":
                comments += 1
        elif word == b"objemb" and group[0] == b"object":
            objects += 1
    return placed + len(in_headers), objects, comments
