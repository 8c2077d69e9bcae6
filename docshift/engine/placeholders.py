"""A slide's or layout's shapes that hold a placeholder, found by their tags and parsed alone.

``master_styles`` reads the paragraphs of a deck's title and body placeholders. Parsing each slide whole, pictures,
tables and every other shape were most of its work on a large deck (of the 9.7 MB of slides and layouts with a
placeholder in the corpus's 25 larger decks, 3.9 MB are the shapes that hold one). LibreOffice prefixes
PresentationML with ``p`` and declares every prefix on a part's root, so a placeholder's shape (``p:sp``) is found
by its tags, and parsed inside a copy of the root's start tag, where its prefixes mean what they meant in the part.
"""

import re
from collections.abc import Iterator

from docshift.engine.embedding import root_frame
from docshift.engine.inventory.package import NS_P

SHAPE_TAG = re.compile(rb"<p:sp(?=[\s/>])")  # a shape's start tag, as LibreOffice prefixes it
SHAPE_END = b"</p:sp>"  # a shape holds no shape
PLACEHOLDER_TAG = re.compile(rb"<(?:\w+:)?ph[\s/>]")  # under any prefix
PLACEHOLDER = re.compile(rb"<p:ph[\s/>]")  # under PresentationML's, where ``documents`` has found it is ``p``
# each binding of a prefix (and any text that reads like one, which can only make ``documents`` refuse a part)
NAMESPACE = re.compile(rb"""xmlns(?::([\w.-]+))?\s*=\s*["']([^"']*)["']""")


def documents(data: bytes) -> list[tuple[bytes, int]] | None:
    """Each shape of the part ``data`` that holds a placeholder as a document of its own, inside the root's start
    tag, with how far its bytes lie from the part's (its byte ``n`` is the part's ``n + shift``). None where its tags
    may not find them all: a prefix bound to two namespaces, a default namespace, PresentationML under another
    prefix than ``p`` or bound twice, a shape not closed."""
    bound: dict[bytes, bytes] = {}
    for prefix, uri in NAMESPACE.findall(data):
        if not prefix or bound.setdefault(prefix, uri) != uri:
            return None
    frame = root_frame(data)
    if frame is None or bound.get(b"p") != NS_P.encode() or data.count(NS_P.encode()) != 1:
        return None
    head, tail = frame
    found = []
    for shape in _shapes(data):
        if shape is None:
            return None
        start, end = shape
        if PLACEHOLDER.search(data, start, end):
            found.append((head + data[start:end] + tail, start - len(head)))
    return found


def _shapes(data: bytes) -> Iterator[tuple[int, int] | None]:
    """The span of each shape of ``data`` from its start tag to the first shape's end tag after it (a shape written
    empty, ``<p:sp/>``, takes the next one in with it); None for a shape not closed."""
    done = 0
    for tag in SHAPE_TAG.finditer(data):
        if tag.start() < done:
            continue
        end = data.find(SHAPE_END, tag.end())
        yield None if end < 0 else (tag.start(), end + len(SHAPE_END))
        done = end + len(SHAPE_END)
