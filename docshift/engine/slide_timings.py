"""When a deck's slides move on in the show, put back into the .pptx where LibreOffice's export drops it.

A slide of a self-running deck (a kiosk, rehearsed timings) moves on by itself after so many milliseconds, and may
ignore clicks: its SlideShowSlideInfoAtom's slideTime with fAutoAdvance, and fManualAdvance cleared. A .pptx holds
the same in the slide's ``p:transition`` as ``advTm`` and ``advClick="0"``. LibreOffice 25.2 loads both (its ODF
says "automatic" and the duration), but its OOXML export writes a ``p:transition`` only for a slide with a
transition effect: a slide that moves on after 5 s with no effect comes out waiting for a click, and the show
stops there. Where it does write one, it rounds the time to whole seconds and leaves ``advClick`` out.

``mend`` gives each such slide (``Inventory.advances``, counted with the deck's other slide records) its
``advTm`` and ``advClick`` as the legacy file has them: on the ``p:transition`` LibreOffice wrote (each of them,
where it wrote PowerPoint 2010's in ``mc:AlternateContent`` beside a fallback), or on one of its own where the slide
has none, in the place the schema gives it (after ``p:clrMapOvr``, before ``p:timing`` and ``p:extLst``).
"""

from collections.abc import Iterator
from pathlib import Path

from docshift.engine import objects, ooxml
from docshift.engine.embedding import PartEdit, child_place, edit_parts, guarded
from docshift.engine.inventory.package import NS_P, SEP, Package

TRANSITION = f"{NS_P}{SEP}transition"
AFTER_TRANSITION = {f"{NS_P}{SEP}timing", f"{NS_P}{SEP}extLst"}  # the slide's children a transition goes before


def mend(result: Path, source: Path, kind: str, advances: dict[int, tuple[int | None, bool]]) -> int:
    """Give the slides of ``result`` (LibreOffice's export of the .ppt ``source``) the ``advances`` the legacy file's
    slides have ({slide number: (milliseconds or None, whether a click moves it on)}: ``Inventory.advances``).
    Returns how many slides were given theirs (0: the file is untouched). Never raises for what the file holds."""
    if kind != "ppt" or not advances:
        return 0
    return guarded(lambda result, _: _mend(result, advances), result, source,
                   "the slides' timings of %s stay as LibreOffice wrote them: %r")


def _mend(result: Path, advances: dict[int, tuple[int | None, bool]]) -> int:
    def parts(package: Package) -> Iterator[tuple[str, PartEdit]]:
        slides = objects.slide_parts(package)
        for number, (after, click) in sorted(advances.items()):
            if number <= len(slides):
                yield slides[number - 1], _timing(after, click)

    return edit_parts(result, parts)


def _timing(after: int | None, click: bool) -> PartEdit:
    """The edit of a slide part that gives it ``timed``'s ``after`` and ``click``."""
    return lambda data, name: (timed(data, name, after, click), 1)


def timed(data: bytes, name: str, after: int | None, click: bool) -> bytes:
    """The slide part ``name`` (``data``) whose show moves on after ``after`` milliseconds (None: it waits) and on a
    click if ``click``, every other byte as it was."""
    wanted = {key: value for key, value in (("advTm", None if after is None else str(after)),
                                            ("advClick", None if click else "0")) if value is not None}
    has_transition, before, _ = child_place(data, name, TRANSITION, AFTER_TRANSITION)
    if not has_transition:
        attributes = "".join(f' {key}="{value}"' for key, value in wanted.items())
        return data[:before] + f'<p:transition xmlns:p="{NS_P}"{attributes}/>'.encode() + data[before:]
    return ooxml.edit_tags(data, name, lambda tag, attributes: {
        key: value for key, value in wanted.items() if attributes.get(key) != value} if tag == TRANSITION else None)
