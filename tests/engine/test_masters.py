"""A presentation whose export crashed is stored again with a theme object of its own on every master
(``docshift/engine/uno/masters.py``).

LibreOffice 25.2's PPTX export writes one master of each set it finds alike (the same page properties and theme
object), and a slide that shows its date on any other master of the set makes it crash: a deck PowerPoint saved with
twelve title masters failed in a plain ``soffice --convert-to`` and in docshift (unseen set 10). The suite's deck, a
flat ODF presentation whose masters carry no theme, crashes it the same way; its masters differ (one has a title and
an outline, one a prompt in its date placeholder, one a rectangle), which the export's test does not look at."""

import re
import zipfile

import pytest
from conftest import flat_odf

from docshift.engine.convert import _export
from docshift.errors import OfficeCrashed
from docshift.formats import FORMATS

FILTER = FORMATS["ppt"].export_filter
NAMESPACES = ('xmlns:style="urn:oasis:names:tc:opendocument:xmlns:style:1.0" '
              'xmlns:fo="urn:oasis:names:tc:opendocument:xmlns:xsl-fo-compatible:1.0" '
              'xmlns:presentation="urn:oasis:names:tc:opendocument:xmlns:presentation:1.0" xmlns:svg=')
MASTERS = ("First", "Titled", "Second", "Logo")
LOGO = '<a:ext cx="1440000" cy="720000"/>'  # the rectangle's size, 4 cm by 2 cm, in EMU


def master(name, prompt="", logo=False):
    """A master with a date, footer and slide number placeholder; ``prompt``: the date placeholder's own text, which
    no slide shows; ``logo``: a rectangle more, which every slide on it shows."""
    def box(kind, x, text=""):
        return (f'<draw:frame presentation:class="{kind}" svg:x="{x}cm" svg:y="19cm" svg:width="6cm" '
                f'svg:height="1.5cm"><draw:text-box>{f"<text:p>{text}</text:p>" if text else ""}</draw:text-box>'
                '</draw:frame>')
    shape = '<draw:rect svg:x="20cm" svg:y="1cm" svg:width="4cm" svg:height="2cm"/>' if logo else ""
    return (f'<style:master-page style:name="{name}" style:page-layout-name="PM1" draw:style-name="Mdp1">'
            f'{box("date-time", 1, prompt)}{box("footer", 10)}{box("page-number", 20)}{shape}</style:master-page>')


@pytest.fixture(scope="module")
def deck(tmp_path_factory):
    """Slides on "Titled" (the first slide's master, which LibreOffice gives a title and an outline), "Second" and
    "Logo", each showing a fixed date; "First" holds no slide."""
    pages = "".join(f'<draw:page draw:name="p{n}" draw:style-name="dp1" draw:master-page-name="{name}" '
                    'presentation:use-date-time-name="dtd1"/>' for n, name in enumerate(MASTERS[1:], 1))
    styles = ('<office:styles/><office:automatic-styles><style:style style:name="Mdp1" style:family="drawing-page"/>'
              '<style:style style:name="dp1" style:family="drawing-page"><style:drawing-page-properties '
              'presentation:display-date-time="true" presentation:display-footer="false" '
              'presentation:display-page-number="false"/></style:style><style:page-layout style:name="PM1">'
              '<style:page-layout-properties fo:page-width="28cm" fo:page-height="21cm"/></style:page-layout>'
              '</office:automatic-styles><office:master-styles>'
              f'{master("First")}{master("Titled")}{master("Second", prompt="D")}{master("Logo", logo=True)}'
              '</office:master-styles>')
    body = '<presentation:date-time-decl presentation:name="dtd1" presentation:source="fixed">DATE42' \
           '</presentation:date-time-decl>' + pages
    document = flat_odf("presentation", body).replace("<office:body>", styles + "<office:body>").replace(
        "xmlns:svg=", NAMESPACES, 1)
    path = tmp_path_factory.mktemp("masters") / "deck.fodp"
    path.write_text(document)
    return path


def shown(path):
    """Of a .pptx: its slide masters, the master behind each slide (through its layout), each slide's text, and the
    masters that hold the logo."""
    with zipfile.ZipFile(path) as package:
        names = package.namelist()

        def target(part, kind):
            rels = package.read(re.sub(r"(\w+\.xml)$", r"_rels/\1.rels", part)).decode()
            return re.search(rf'Target="\.\./{kind}s/({kind}\d+\.xml)"', rels).group(1)

        slides = sorted((n for n in names if re.fullmatch(r"ppt/slides/slide\d+\.xml", n)),
                        key=lambda n: int(re.search(r"\d+", n).group()))
        behind = [target("ppt/slideLayouts/" + target(n, "slideLayout"), "slideMaster") for n in slides]
        texts = [re.findall(r"<a:t>([^<]*)</a:t>", package.read(n).decode()) for n in slides]
        masters = sorted(n.rsplit("/", 1)[1] for n in names if re.fullmatch(r"ppt/slideMasters/slideMaster\d+\.xml", n))
        logos = {n.rsplit("/", 1)[1] for n in names if re.fullmatch(r"ppt/slideMasters/slideMaster\d+\.xml", n)
                 and LOGO in package.read(n).decode()}
    return masters, behind, texts, logos


def test_the_suite_s_deck_crashes_libreoffice_s_export_as_it_comes(office, deck, tmp_path):
    """What the retry mends: without it, LibreOffice's own export of the deck crashes its child. A LibreOffice that
    no longer crashes here fails this test on purpose: the mend may then go."""
    with pytest.raises(OfficeCrashed):
        office.export(deck, tmp_path / "as-it-comes.pptx", FILTER, 60)


def test_the_retry_after_a_crash_gives_each_master_a_theme_and_keeps_every_master(office, deck, tmp_path):
    result, report = _export(office, deck, tmp_path, "pptx", FILTER, 60, None, {"parts": True}, None, None,
                             lambda: None)
    assert result.parent.name == "attempt-2"  # the first child crashed; the second stored it
    assert report["masters_given_own_themes"] == len(MASTERS)
    masters, behind, texts, logos = shown(result)
    assert len(masters) == len(MASTERS)  # each written, none merged into another
    assert len(set(behind)) == 3  # each slide on a master of its own, as in the source
    assert logos == {behind[2]}  # the rectangle stays on the master of the slide that shows it
    assert texts == [["DATE42"]] * 3
