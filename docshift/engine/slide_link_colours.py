"""A deck's hyperlinked text shown in PowerPoint in the colour LibreOffice gives it.

PowerPoint colours the text of a hyperlink with its theme's hyperlink colour, whatever colour the run has, unless the
link says otherwise: the ``hlinkClr`` extension of [MS-ODRAWXML] (``val="tx"``: the text's own colour), which
PowerPoint 2019 and later read. A .ppt's links show in its colour scheme's "accent and hyperlink" colour; LibreOffice
loads that colour onto each link's run and writes it there, and writes its own theme, whose hyperlink colour is
``0000ee``: light links on a dark slide (the corpus's ``WithLinks.ppt``, ``ccccff`` on dark blue) came out dark
blue, barely to be read. ``mend`` gives each hyperlink of a run that has a colour of its own the extension, so that
PowerPoint shows the colour LibreOffice shows; the rest of the slide is left byte for byte.
"""

from pathlib import Path

from docshift.engine import objects, ooxml
from docshift.engine.embedding import edit_parts, guarded
from docshift.engine.inventory.common import Unreadable
from docshift.engine.inventory.package import NS_A, SEP

FILL, LINK, EXTENSIONS = (f"{NS_A}{SEP}{local}" for local in ("solidFill", "hlinkClick", "extLst"))
COLOUR_NS = "http://schemas.microsoft.com/office/drawing/2018/hyperlinkcolor"
TEXT_COLOUR = (f'<a:extLst xmlns:a="{NS_A}"><a:ext uri="{{A12FA001-AC4F-418D-AE19-62706E023703}}">'
               f'<ahyp:hlinkClr xmlns:ahyp="{COLOUR_NS}" val="tx"/></a:ext></a:extLst>').encode()


def mend(result: Path, source: Path, kind: str, links: int | None) -> int:
    """Give each hyperlink of a coloured run of the slides of ``result`` (LibreOffice's export of the .ppt
    ``source``) the text's colour; ``links``: how many the legacy file's slides hold (the report's ``hyperlinks``:
    nothing is read when they hold none). Returns how many links were given it (0: the file is untouched)."""
    if kind != "ppt" or not links:
        return 0
    return guarded(lambda result, _: _mend(result), result, source,
                   "the hyperlinks' colours of %s stay as LibreOffice wrote them: %r")


def _mend(result: Path) -> int:
    return edit_parts(result, lambda package: ((slide, coloured) for slide in objects.slide_parts(package)
                                               if package.holds(slide, b"hlinkClick")))


def coloured(data: bytes, name: str) -> tuple[bytes, int]:
    """(the slide part ``name`` (``data``) with each ``a:hlinkClick`` of a run's properties that hold a colour given
    the text's colour, where it names none of its own; how many were)."""
    wanted: list[tuple[int, int | None]] = []  # (where the hlinkClick starts, where its end tag starts or None)
    # of each open element: [it has a fill (a run's properties: its text's colour), it is a link to give the colour]
    stack: list[list[bool]] = []

    def start(tag: str, _: dict[str, str]) -> None:
        parent = stack[-1] if stack else [False, False]
        stack.append([False, False])
        if tag == FILL:
            parent[0] = True
        elif tag == LINK and parent[0]:
            stack[-1][1] = True
            wanted.append((reader.CurrentByteIndex, None))
        elif tag == EXTENSIONS and parent[1]:
            wanted.pop()  # a link with extensions of its own keeps them as they are
            parent[1] = False

    def end(tag: str) -> None:
        element = stack.pop()
        if tag == LINK and element[1] and wanted and wanted[-1][1] is None:
            wanted[-1] = (wanted[-1][0], reader.CurrentByteIndex)

    reader = ooxml.parser(name, Unreadable, start, end)
    ooxml.feed(reader, (data,), name, Unreadable)
    out, done = [], 0
    for at, end_at in wanted:
        qualified, tag_end, _ = ooxml.start_tag(data, at, name)
        if tag_end.group().endswith(b"/>"):  # <a:hlinkClick .../>: opened, given the extension, and closed
            out += [data[done:tag_end.start()], b">", TEXT_COLOUR, b"</" + qualified + b">"]
            done = tag_end.end()
        elif end_at is not None:
            out += [data[done:end_at], TEXT_COLOUR]
            done = end_at
    return b"".join([*out, data[done:]]), len(wanted)
