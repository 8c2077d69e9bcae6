"""A deck's slide transitions, kept as a plain ``soffice --convert-to`` keeps them.

LibreOfficeKit, while active, makes LibreOffice's import of a .ppt leave out the transitions that Collabora Online's
slideshow does not play: a random one, a diagonal cover or strips. The forkit's parent switches it off once it has
started LibreOffice (``docshift/engine/uno/forkit.py``), so that a child converts as a plain soffice does.
"""

import re
import zipfile

import pptx
import pytest
from conftest import _soffice_save as soffice

from docshift.engine import convert

# one slide each: its title, and the transition its .pptx is given before LibreOffice saves the deck as a .ppt
TRANSITIONS = {
    "Random": '<p:transition spd="slow"><p:random/></p:transition>',
    "Cover": '<p:transition><p:cover dir="rd"/></p:transition>',
    "Strips": '<p:transition><p:strips dir="lu"/></p:transition>',
    "Fade": "<p:transition><p:fade/></p:transition>",
}
TRANSITION = re.compile(rb"<p:transition\b.*?</p:transition>|<p:transition\b[^>]*/>", re.DOTALL)


@pytest.fixture(scope="module")
def deck(tmp_path_factory):
    """A .ppt saved by LibreOffice whose four slides have the four ``TRANSITIONS``."""
    out = tmp_path_factory.mktemp("transitions")
    presentation = pptx.Presentation()
    for title in TRANSITIONS:
        presentation.slides.add_slide(presentation.slide_layouts[1]).shapes.title.text = title
    presentation.save(out / "plain.pptx")
    with zipfile.ZipFile(out / "plain.pptx") as plain, zipfile.ZipFile(out / "moving.pptx", "w") as moving:
        for number, info in enumerate(plain.infolist()):
            data = plain.read(info)
            slide = re.fullmatch(r"ppt/slides/slide([0-9]+)\.xml", info.filename)
            if slide:
                transition = list(TRANSITIONS.values())[int(slide.group(1)) - 1]
                data = data.replace(b"</p:clrMapOvr>", b"</p:clrMapOvr>" + transition.encode())
                assert transition.encode() in data, number
            moving.writestr(info, data)
    return soffice(out / "moving.pptx", "ppt:MS PowerPoint 97", out)


def transitions(result):
    """The transitions of each slide of the .pptx ``result``, in slide order."""
    with zipfile.ZipFile(result) as package:
        slides = sorted((name for name in package.namelist() if re.fullmatch(r"ppt/slides/slide[0-9]+\.xml", name)),
                        key=lambda name: int(re.search(r"[0-9]+", name).group()))
        return [TRANSITION.findall(package.read(name)) for name in slides]


def test_every_transition_a_plain_soffice_keeps_is_kept(office, deck, tmp_path):
    plain = transitions(soffice(deck, "pptx", tmp_path / "plain"))
    assert [len(found) for found in plain] == [1, 1, 1, 1]  # the .ppt holds all four
    assert b"<p:random/>" in plain[0][0] and b'<p:cover dir="rd"/>' in plain[1][0]
    converted = convert.convert(office, deck, "ppt", tmp_path / "work", 60)
    assert transitions(converted.path) == plain
