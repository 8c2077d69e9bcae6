"""When a deck's slides move on in the show: after so many milliseconds, and whether a click does it. LibreOffice's
export writes neither for a slide without a transition effect; the result gets both back from the .ppt."""

import shutil
import struct
from xml.etree import ElementTree

import olefile
import pytest
from conftest import _soffice_save as soffice
from test_transitions import transitions

from docshift.engine import convert, inventory, slide_timings
from docshift.engine.inventory import officeart, ppt_sounds
from docshift.engine.inventory.package import NS_P
from docshift.engine.inventory.ppt import _Presentation

NAMESPACES = ('xmlns:office="urn:oasis:names:tc:opendocument:xmlns:office:1.0" '
              'xmlns:style="urn:oasis:names:tc:opendocument:xmlns:style:1.0" '
              'xmlns:text="urn:oasis:names:tc:opendocument:xmlns:text:1.0" '
              'xmlns:draw="urn:oasis:names:tc:opendocument:xmlns:drawing:1.0" '
              'xmlns:svg="urn:oasis:names:tc:opendocument:xmlns:svg-compatible:1.0" '
              'xmlns:presentation="urn:oasis:names:tc:opendocument:xmlns:presentation:1.0" '
              'xmlns:smil="urn:oasis:names:tc:opendocument:xmlns:smil-compatible:1.0"')
# each slide's page style: on by itself after 5 s with no effect; on a click (the default); after 4 s with a fade
PAGES = ['presentation:transition-type="automatic" presentation:duration="PT5S"', "",
         'presentation:transition-type="automatic" presentation:duration="PT4S" smil:type="fade" '
         'smil:subtype="crossfade"']
STYLE, PRESENTATION = "urn:oasis:names:tc:opendocument:xmlns:style:1.0", \
    "urn:oasis:names:tc:opendocument:xmlns:presentation:1.0"
DRAW = "urn:oasis:names:tc:opendocument:xmlns:drawing:1.0"


@pytest.fixture(scope="module")
def deck(tmp_path_factory):
    """A .ppt saved by LibreOffice from the three ``PAGES``."""
    out = tmp_path_factory.mktemp("timings")
    styles = "".join(f'<style:style style:family="drawing-page" style:name="dp{number}">'
                     f'<style:drawing-page-properties {page}/></style:style>' for number, page in enumerate(PAGES, 1))
    pages = "".join(f'<draw:page draw:name="s{number}" draw:style-name="dp{number}"><draw:frame svg:x="2cm" '
                    f'svg:y="2cm" svg:width="10cm" svg:height="2cm"><draw:text-box><text:p>slide {number}</text:p>'
                    '</draw:text-box></draw:frame></draw:page>' for number in range(1, len(PAGES) + 1))
    (out / "timed.fodp").write_text(
        f'<?xml version="1.0" encoding="UTF-8"?><office:document {NAMESPACES} office:version="1.2" '
        'office:mimetype="application/vnd.oasis.opendocument.presentation"><office:automatic-styles>'
        f'{styles}</office:automatic-styles><office:body><office:presentation>{pages}</office:presentation>'
        '</office:body></office:document>')
    return soffice(out / "timed.fodp", "ppt:MS PowerPoint 97", out)


def read_back(path, outdir):
    """[(how each page moves on, after how long)] as LibreOffice reads the deck at ``path``."""
    tree = ElementTree.parse(soffice(path, "fodp", outdir))
    styles = {}
    for style in tree.iter(f"{{{STYLE}}}style"):
        for properties in style.iter(f"{{{STYLE}}}drawing-page-properties"):
            styles[style.get(f"{{{STYLE}}}name")] = (properties.get(f"{{{PRESENTATION}}}transition-type"),
                                                     properties.get(f"{{{PRESENTATION}}}duration"))
    return [styles.get(page.get(f"{{{DRAW}}}style-name")) for page in tree.iter(f"{{{DRAW}}}page")]


def slide_times(path):
    """[(slideTime, flags)] of each slide's SlideShowSlideInfoAtom in the .ppt at ``path``."""
    show = _Presentation.of_file(path)
    found = []
    for located in show.slide_containers():
        for rec_type, _, _, body, _ in officeart.children(show.doc, *located, show.budget):
            if rec_type == ppt_sounds.RT_SLIDE_INFO:
                found.append((struct.unpack_from("<i", show.doc, body)[0],
                              struct.unpack_from("<H", show.doc, body + 10)[0]))
    return found


def test_the_source_counts_the_slides_that_move_on_by_themselves(deck):
    """LibreOffice's .ppt gives the first and third slides fAutoAdvance with a slideTime (1,024 a second, as its
    export writes it); the second waits for a click, and is left out."""
    times = slide_times(deck)
    assert [flags & (ppt_sounds.AUTO | ppt_sounds.CLICK) for _, flags in times] == [0x401, 0x001, 0x401]
    assert inventory.of_source(deck, "ppt").advances == {1: (times[0][0], True), 3: (times[2][0], True)}


def test_a_slide_that_moves_on_with_no_effect_keeps_its_time(office, deck, tmp_path):
    """A plain soffice writes no transition for the first slide, whose show then waits for a click, and rounds the
    third's time to whole seconds; docshift's result has both as the .ppt has them (slideTime is in milliseconds).
    LibreOffice reads from the .ppt that the first moves on by itself; its OOXML import reads ``advTm`` only beside
    an effect, so it reads docshift's result as it reads the plain one, and nothing less."""
    (first, _), _, (third, _) = slide_times(deck)
    plain_result = soffice(deck, "pptx", tmp_path / "plain")
    plain = transitions(plain_result)
    assert plain[0] == [] and plain[1] == [] and b'advTm="4000"' in plain[2][0]
    converted = convert.convert(office, deck, "ppt", tmp_path / "work", 60)
    mended = transitions(converted.path)
    assert mended[0] == [f'<p:transition xmlns:p="{NS_P}" advTm="{first}"/>'.encode()]
    assert mended[1] == [] and mended[2] == [plain[2][0].replace(b'advTm="4000"', f'advTm="{third}"'.encode())]
    legacy = read_back(deck, tmp_path / "legacy")
    assert legacy == [("automatic", "PT5.120000000S"), ("semi-automatic", None), ("automatic", "PT4.096000000S")]
    assert read_back(converted.path, tmp_path / "result") == read_back(plain_result, tmp_path / "plain-read")
    assert converted.fidelity["complete"] is True


def test_a_slide_a_click_does_not_move_on_says_so(office, deck, tmp_path):
    """The second slide with fManualAdvance cleared, as PowerPoint writes a slide that neither a click nor a time
    moves on (LibreOffice's export has no such slide: it calls it semi-automatic and writes a click): its result
    slide gets ``advClick="0"`` and nothing else."""
    edited = tmp_path / "no-click.ppt"
    shutil.copy(deck, edited)
    show = _Presentation.of_file(edited)
    data = bytearray(show.doc)
    for rec_type, _, _, body, _ in officeart.children(data, *show.slide_containers()[1], show.budget):
        if rec_type == ppt_sounds.RT_SLIDE_INFO:
            struct.pack_into("<H", data, body + 10, struct.unpack_from("<H", data, body + 10)[0] & ~ppt_sounds.CLICK)
    with olefile.OleFileIO(str(edited), write_mode=True) as ole:
        ole.write_stream("PowerPoint Document", bytes(data))
    assert inventory.of_source(edited, "ppt").advances[2] == (None, False)
    converted = convert.convert(office, edited, "ppt", tmp_path / "work", 60)
    assert transitions(converted.path)[1] == [f'<p:transition xmlns:p="{NS_P}" advClick="0"/>'.encode()]


def test_a_transition_libreoffice_wrote_is_given_the_attributes_it_lacks():
    """Each ``p:transition`` of a slide (PowerPoint 2010's in ``mc:AlternateContent`` and its fallback) gets the
    time and the click; a time LibreOffice rounded is set to the .ppt's, every other byte kept."""
    slide = (f'<p:sld xmlns:p="{NS_P}" xmlns:mc="m"><p:cSld/><p:clrMapOvr/><mc:AlternateContent><mc:Choice>'
             '<p:transition spd="slow" advTm="3000"><p:fade/></p:transition></mc:Choice><mc:Fallback>'
             "<p:transition spd='slow'/></mc:Fallback></mc:AlternateContent><p:timing/></p:sld>").encode()
    assert slide_timings.timed(slide, "slide1.xml", 2615, False) == slide.replace(
        b'advTm="3000"', b'advTm="2615" advClick="0"').replace(
        b"spd='slow'", b"spd='slow' advTm=\"2615\" advClick=\"0\"")
    bare = f'<p:sld xmlns:p="{NS_P}"><p:cSld/><p:clrMapOvr/><p:timing/><p:extLst/></p:sld>'.encode()
    assert slide_timings.timed(bare, "slide1.xml", 1500, True) == bare.replace(
        b"<p:timing/>", f'<p:transition xmlns:p="{NS_P}" advTm="1500"/><p:timing/>'.encode())
    least = f'<p:sld xmlns:p="{NS_P}"><p:cSld/></p:sld>'.encode()
    assert slide_timings.timed(least, "slide1.xml", None, False) == least.replace(
        b"</p:sld>", f'<p:transition xmlns:p="{NS_P}" advClick="0"/></p:sld>'.encode())
