"""A deck's hyperlinked text keeps, in PowerPoint, the colour LibreOffice gives it: without the ``hlinkClr``
extension PowerPoint paints a link in its theme's hyperlink colour, which LibreOffice's theme makes ``0000ee``."""

import re
import zipfile

from conftest import ROOT
from conftest import _soffice_save as soffice

from docshift.engine import convert, slide_link_colours
from docshift.engine.inventory.package import NS_A

CORPUS = ROOT.parent / "shared" / "corpus" / "ppt"
RUN = re.compile(rb'<a:rPr\b[^>]*>(?:(?!</a:rPr>).)*?<a:srgbClr val="([0-9a-fA-F]{6})"/>(?:(?!</a:rPr>).)*?'
                 rb"<a:hlinkClick\b(?:(?!</a:rPr>).)*</a:rPr>", re.DOTALL)


def links(result):
    """[(the colour of each hyperlinked run, whether it tells PowerPoint to show that colour)] of the slides of the
    .pptx ``result``, in the order of their parts."""
    with zipfile.ZipFile(result) as package:
        slides = [package.read(name) for name in sorted(package.namelist())
                  if re.fullmatch(r"ppt/slides/slide[0-9]+\.xml", name)]
    return [(match.group(1).decode(), b'val="tx"' in match.group())
            for slide in slides for match in RUN.finditer(slide)]


def test_a_link_s_text_keeps_its_colour(office, tmp_path):
    """``WithLinks.ppt``'s three links show in its scheme's light ``ccccff`` on dark blue. A plain soffice writes
    that colour on each run and nothing that makes PowerPoint show it; docshift's result says to show the text's
    colour on each, and LibreOffice, saving the result again, keeps the colours."""
    plain = links(soffice(CORPUS / "WithLinks.ppt", "pptx", tmp_path / "plain"))
    assert plain == [("ccccff", False)] * 3
    converted = convert.convert(office, CORPUS / "WithLinks.ppt", "ppt", tmp_path / "work", 60)
    assert links(converted.path) == [("ccccff", True)] * 3
    assert converted.fidelity["counts"]["hyperlinks"] == {"source": 3, "result": 3}
    again = soffice(converted.path, "pptx", tmp_path / "again")
    assert [colour for colour, _ in links(again)] == ["ccccff"] * 3


def test_only_a_coloured_run_s_link_is_given_the_text_colour():
    """A link of a run with a fill gets the extension (an empty one opened, one with a sound given it after the
    sound); a run without a fill, a shape's own link and a link with extensions of its own are left as they are."""
    head = f'<p:sld xmlns:p="p" xmlns:a="{NS_A}" xmlns:r="r"><a:p>'
    runs = ('<a:r><a:rPr><a:solidFill><a:srgbClr val="ccccff"/></a:solidFill><a:hlinkClick r:id="rId1"/></a:rPr></a:r>'
            '<a:r><a:rPr><a:solidFill/><a:hlinkClick r:id="rId2"><a:snd r:embed="rId3"/></a:hlinkClick></a:rPr></a:r>'
            '<a:r><a:rPr><a:hlinkClick r:id="rId4"/></a:rPr></a:r>'
            '<p:cNvPr id="2" name="x"><a:hlinkClick r:id="rId5"/></p:cNvPr>'
            '<a:r><a:rPr><a:solidFill/><a:hlinkClick r:id="rId6"><a:extLst/></a:hlinkClick></a:rPr></a:r>')
    slide = (head + runs + "</a:p></p:sld>").encode()
    edited, count = slide_link_colours.coloured(slide, "slide1.xml")
    extension = slide_link_colours.TEXT_COLOUR
    assert count == 2
    assert edited == slide.replace(b'<a:hlinkClick r:id="rId1"/>',
                                   b'<a:hlinkClick r:id="rId1">' + extension + b"</a:hlinkClick>").replace(
        b'<a:snd r:embed="rId3"/></a:hlinkClick>', b'<a:snd r:embed="rId3"/>' + extension + b"</a:hlinkClick>")


def test_a_deck_saved_for_powerpoint_95_and_97_is_read_from_its_97_storage(office, tmp_path):
    """``bug56240.ppt`` holds a PowerPoint 95 deck at its root and the same deck, as PowerPoint 97 saved it, in
    PP97_DUALSTORAGE, which LibreOffice converts. Read at the root, nothing of it was known: every count of the
    report was unknown and no mend that needs a count ran, so its teal links came out in the theme's link colour.
    Read from the 97 storage, the report counts what the result holds and each link keeps its colour."""
    converted = convert.convert(office, CORPUS / "bug56240.ppt", "ppt", tmp_path / "work", 60)
    counts = converted.fidelity["counts"]
    assert counts["slides"] == {"source": 105, "result": 105}
    assert counts["hyperlinks"] == {"source": 9, "result": 9}
    assert links(converted.path) == [("009999", True)] * 9
