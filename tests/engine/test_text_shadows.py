"""A .ppt's text shadows (``docshift/engine/text_shadows.py``, ``uno/shadows.py``, ``inventory/ppt_text_styles.py``).

LibreOffice 25.2 loads a shadowed run of a .ppt and writes it into the .pptx with an empty ``a:effectLst``. The
suite's deck, a flat ODF presentation saved as a .ppt by LibreOffice, has on its first slide a paragraph with one
shadowed run among plain ones, a shape whose two paragraphs are shadowed, a plain shape and, in a group, a
shadowed shape beside a plain one; its second slide has the same two paragraphs twice, plain first, then shadowed.
"""

import re
import struct
import zipfile

import pytest
from conftest import ROOT
from conftest import _soffice_save as soffice

from docshift.engine import convert, text_shadows
from docshift.engine import inventory as inventories
from docshift.engine.inventory import ppt_text_styles
from docshift.engine.inventory.common import SCHEME_SLOTS
from docshift.engine.inventory.package import NS_A
from docshift.engine.job import Job

CORPUS = ROOT.parent / "shared" / "corpus" / "ppt"
NAMESPACES = ('xmlns:office="urn:oasis:names:tc:opendocument:xmlns:office:1.0" '
              'xmlns:style="urn:oasis:names:tc:opendocument:xmlns:style:1.0" '
              'xmlns:text="urn:oasis:names:tc:opendocument:xmlns:text:1.0" '
              'xmlns:draw="urn:oasis:names:tc:opendocument:xmlns:drawing:1.0" '
              'xmlns:fo="urn:oasis:names:tc:opendocument:xmlns:xsl-fo-compatible:1.0" '
              'xmlns:svg="urn:oasis:names:tc:opendocument:xmlns:svg-compatible:1.0"')
STYLES = ('<style:style style:name="S" style:family="text"><style:text-properties fo:text-shadow="1pt 1pt" '
          'fo:font-size="40pt"/></style:style><style:style style:name="P" style:family="text">'
          '<style:text-properties fo:font-size="20pt"/></style:style>')
TWO_LINES = ('<text:p><text:span text:style-name="{0}">Whole title</text:span></text:p>'
             '<text:p><text:span text:style-name="{0}">second line</text:span></text:p>')
# each slide's runs as docshift writes them: (text, shadowed)
EXPECTED = [[("Plain start ", False), ("shadowed middle", True), (" plain end", False), ("Whole title", True),
             ("second line", True), ("Nothing shadowed here", False), ("In a group", True), ("Beside it", False)],
            [("Whole title", False), ("second line", False), ("Whole title", True), ("second line", True)]]
RUN = re.compile(r"<a:r><a:rPr([^>]*)>(.*?)</a:rPr><a:t>([^<]*)</a:t></a:r>", re.DOTALL)
SHADOW = re.compile(r'<a:effectLst><a:outerShdw dist="([0-9]+)" dir="2700000" algn="tl" rotWithShape="0">'
                    r'<a:srgbClr val="([0-9A-F]{6})"/></a:outerShdw></a:effectLst>')


def frame(top, body):
    return (f'<draw:frame svg:x="1cm" svg:y="{top}cm" svg:width="20cm" svg:height="3cm"><draw:text-box>{body}'
            '</draw:text-box></draw:frame>')


def flat_deck(path, pages):
    path.write_text(f'<?xml version="1.0" encoding="UTF-8"?><office:document {NAMESPACES} office:version="1.2" '
                    'office:mimetype="application/vnd.oasis.opendocument.presentation"><office:automatic-styles>'
                    f'{STYLES}</office:automatic-styles><office:body><office:presentation>'
                    + "".join(f'<draw:page draw:name="p{number}">{page}</draw:page>'
                              for number, page in enumerate(pages, 1))
                    + '</office:presentation></office:body></office:document>')
    return path


@pytest.fixture(scope="module")
def deck(tmp_path_factory):
    out = tmp_path_factory.mktemp("shadows")
    first = (frame(1, '<text:p><text:span text:style-name="P">Plain start </text:span><text:span '
                      'text:style-name="S">shadowed middle</text:span><text:span text:style-name="P"> plain end'
                      '</text:span></text:p>')
             + frame(5, TWO_LINES.format("S")) + frame(9, "<text:p>Nothing shadowed here</text:p>")
             + "<draw:g>" + frame(13, '<text:p><text:span text:style-name="S">In a group</text:span></text:p>')
             + frame(16, "<text:p>Beside it</text:p>") + "</draw:g>")
    second = frame(1, TWO_LINES.format("P")) + frame(5, TWO_LINES.format("S"))
    return soffice(flat_deck(out / "shadowed.fodp", [first, second]), "ppt:MS PowerPoint 97", out)


def runs(result):
    """Each slide's runs of the .pptx ``result``: [(text, its rPr's attributes, its shadow's (dist, colour) or
    None, its rPr's children without that shadow)]."""
    with zipfile.ZipFile(result) as package:
        slides = sorted((name for name in package.namelist() if re.fullmatch(r"ppt/slides/slide[0-9]+\.xml", name)),
                        key=lambda name: int(re.search("[0-9]+", name).group()))
        found = []
        for name in slides:
            part = package.read(name).decode()
            found.append([(text, attributes, (lambda shadow: shadow and (int(shadow[1]), shadow[2]))(
                SHADOW.search(children)), SHADOW.sub("<a:effectLst></a:effectLst>", children))
                for attributes, children, text in RUN.findall(part)])
        return found


def test_libreoffice_loads_the_shadow_and_drops_it(deck, tmp_path):
    """What the mend is for: LibreOffice loads the deck's shadows (its own ODF writes them) and a plain soffice's
    .pptx writes no run a shadow. A LibreOffice that writes it fails this test on purpose: the mend may then go."""
    assert (soffice(deck, "fodp", tmp_path / "odf").read_text().count('fo:text-shadow="1pt 1pt"')) >= 1
    plain = runs(soffice(deck, "pptx", tmp_path / "plain"))
    assert [[text for text, *_ in slide] for slide in plain] == [[text for text, _ in slide] for slide in EXPECTED]
    assert not any(shadow for slide in plain for _, _, shadow, _ in slide)


def test_each_shadowed_run_gets_its_shadow(office, deck, tmp_path):
    """Each run loaded shadowed has a hard shadow below and to the right, a twentieth of its font size each way, in
    the colour scheme's shadow colour; every other run, and everything else of each run, is as LibreOffice wrote
    it. Of two shapes with the same text, the one that was shadowed is."""
    plain = runs(soffice(deck, "pptx", tmp_path / "plain"))
    converted = convert.convert(office, deck, "ppt", tmp_path / "work", 60)
    ours = runs(converted.path)
    assert [[(text, shadow is not None) for text, _, shadow, _ in slide] for slide in ours] == EXPECTED
    palette = inventories.of_source(deck, "ppt").palettes[1]
    shadow_colour = palette.colours[SCHEME_SLOTS.index("lt2")][0].upper()
    for slide in ours:
        for _, attributes, shadow, _ in slide:
            if shadow is not None:
                size = int(re.search(r'sz="([0-9]+)"', attributes).group(1))
                assert shadow == (round(size / 100 / 20 * 12700 * 2 ** 0.5), shadow_colour)
    assert [[(text, attributes, rest) for text, attributes, _, rest in slide] for slide in ours] == \
        [[(text, attributes, rest) for text, attributes, _, rest in slide] for slide in plain]
    assert converted.fidelity["complete"] is True, converted.fidelity["lost"]


def test_a_deck_without_shadowed_text_is_not_walked_for_it(office, tmp_path, monkeypatch):
    """Where the .ppt's formatting turns no shadow on, the child is told not to read the text for it."""
    deck = soffice(flat_deck(tmp_path / "plain.fodp", [frame(1, "<text:p>No shadow</text:p>")]),
                   "ppt:MS PowerPoint 97", tmp_path)
    assert inventories.of_source(deck, "ppt").shadows is False
    sent = []
    send = Job.send
    monkeypatch.setattr(Job, "send", lambda self, message: (sent.append(message), send(self, message))[1])
    converted = convert.convert(office, deck, "ppt", tmp_path / "work", 60)
    assert [message["shadows"] for message in sent] == [False]
    assert not any(shadow for slide in runs(converted.path) for _, _, shadow, _ in slide)


def test_the_records_that_turn_a_shadow_on():
    """A text's character runs, a master's style levels and the default character formatting; a paragraph run's
    fields are stepped over; a record cut short counts as shadowed (LibreOffice then decides)."""
    shadow_on, bold = struct.pack("<IH", 0x10, 0x10), struct.pack("<IH", 0x01, 0x01)
    sized_colour = struct.pack("<IHI", (1 << 17) | (1 << 18), 2400, 0xFE000000)
    tabs = struct.pack("<IHHH", 1 << 20, 1, 720, 0)  # a paragraph run with one tab stop: its place, its kind
    text = struct.pack("<IH", 6, 0) + tabs
    assert ppt_text_styles.runs_shadowed(*bounds(text + struct.pack("<I", 3) + bold + struct.pack("<I", 3)
                                                 + shadow_on), 5) is True
    assert ppt_text_styles.runs_shadowed(*bounds(text + struct.pack("<I", 6) + bold), 5) is False
    assert ppt_text_styles.runs_shadowed(*bounds(text + struct.pack("<I", 6) + sized_colour), 5) is False
    assert ppt_text_styles.runs_shadowed(*bounds(text + struct.pack("<I", 6) + struct.pack("<IH", 0x10, 0)), 5) \
        is False  # the shadow turned off
    assert ppt_text_styles.runs_shadowed(*bounds(text + struct.pack("<I", 6) + shadow_on[:5]), 5) is True
    level = struct.pack("<I", 0) + bold
    assert ppt_text_styles.master_shadowed(*bounds(struct.pack("<H", 2) + level + struct.pack("<I", 0)
                                                   + shadow_on), 0) is True
    assert ppt_text_styles.master_shadowed(*bounds(struct.pack("<H", 2) + struct.pack("<H", 0) + level
                                                   + struct.pack("<H", 1) + level), 5) is False
    assert ppt_text_styles.default_shadowed(*bounds(shadow_on)) is True
    assert ppt_text_styles.default_shadowed(*bounds(sized_colour)) is False


def bounds(body):
    return body, 0, len(body)


def test_runs_are_found_by_their_shape_s_place_and_text():
    """The shape named by its place among those with text, where its text agrees, else the first other with that
    text; a mixed shape's runs by their characters. An empty ``a:rPr`` is opened, one without an effect list gets
    one before its fonts, and an effect list that holds an effect already stays."""
    slide = (f'<p:sld xmlns:p="http://schemas.openxmlformats.org/presentationml/2006/main" xmlns:a="{NS_A}">'
             '<p:sp><p:txBody><a:p><a:r><a:rPr sz="2000"><a:effectLst/><a:latin typeface="X"/></a:rPr>'
             '<a:t>Same</a:t></a:r></a:p></p:txBody></p:sp>'
             '<p:sp><p:txBody><a:p><a:r><a:rPr sz="2000"/><a:t>Same</a:t></a:r></a:p></p:txBody></p:sp>'
             '<p:sp><p:txBody><a:p><a:r><a:rPr><a:latin typeface="X"/></a:rPr><a:t>one </a:t></a:r>'
             '<a:r><a:rPr sz="4000"><a:effectLst><a:glow rad="1"/></a:effectLst></a:rPr><a:t>two</a:t></a:r>'
             '<a:endParaRPr sz="4000"/></a:p></p:txBody></p:sp></p:sld>').encode()
    shapes = [[1, text_shadows.digest("Same"), True], [2, text_shadows.digest("onetwo"), [[3, True], [3, True]]],
              [7, text_shadows.digest("absent"), True]]
    written, given = text_shadows.shadowed_runs(slide, "ppt/slides/slide1.xml", shapes, "123456")
    shadow = ('<a:effectLst><a:outerShdw dist="{}" dir="2700000" algn="tl" rotWithShape="0"><a:srgbClr '
              'val="123456"/></a:outerShdw></a:effectLst>')
    assert given == 3
    assert written.decode() == slide.decode().replace(
        '<a:rPr sz="2000"/>', f'<a:rPr sz="2000">{shadow.format(17961)}</a:rPr>').replace(
        '<a:rPr><a:latin', f'<a:rPr>{shadow.format(16164)}<a:latin').replace(
        '<a:endParaRPr sz="4000"/>', f'<a:endParaRPr sz="4000">{shadow.format(35921)}</a:endParaRPr>')


def test_the_child_names_shadowed_text_without_sending_it(office, deck, tmp_path):
    """The child's answer stands for each shape's text by a digest and counts a mixed shape's characters: a deck's
    whole text could be more than an answer may hold."""
    loaded = office.export(deck, tmp_path / "result.pptx", "Impress Office Open XML", 60, parts=False,
                           shadows=True)["loaded"]["shadowed"]
    assert loaded["complete"] is True
    assert loaded["pages"] == [
        ["slide", 0, [[0, text_shadows.digest("Plainstartshadowedmiddleplainend"), [[10, False], [14, True],
                                                                                     [8, False]]],
                      [1, text_shadows.digest("Wholetitlesecondline"), True],
                      [3, text_shadows.digest("Inagroup"), True]]],
        ["slide", 1, [[1, text_shadows.digest("Wholetitlesecondline"), True]]]]


def test_a_master_s_shadowed_text_gets_its_shadow(office, tmp_path):
    """``missing_core_records.ppt``'s master title is shadowed; LibreOffice writes that master's shapes into the
    slide master here (into each layout for other decks: both kinds of part are searched)."""
    source = CORPUS / "missing_core_records.ppt"
    converted = convert.convert(office, source, "ppt", tmp_path / "work", 60)
    plain = soffice(source, "pptx", tmp_path / "plain")
    for result, shadowed in ((plain, False), (converted.path, True)):
        with zipfile.ZipFile(result) as package:
            master = package.read("ppt/slideMasters/slideMaster1.xml").decode()
        title = [children for _, children, text in RUN.findall(master) if text.startswith("Click to edit the title")]
        assert len(title) == 1 and bool(SHADOW.search(title[0])) is shadowed
