"""A deck's master text styles (``docshift/engine/master_styles.py``).

LibreOffice 25.2 writes a .pptx's slide master without text styles: a slide added in PowerPoint takes its defaults,
not the deck's. The suite's deck is a flat ODF presentation saved as a .ppt by LibreOffice, with a master of its own:
an italic, 36 pt DejaVu Serif title in blue, centred; a body of 26 pt DejaVu Sans Mono in grey. Its slide has a
title of two paragraphs, the second set upright, and two levels of body text.
"""

import re
import zipfile

import pytest
from conftest import _soffice_save as soffice
from lxml import etree

from docshift.engine import convert, master_styles, placeholders

A = "http://schemas.openxmlformats.org/drawingml/2006/main"
P = "http://schemas.openxmlformats.org/presentationml/2006/main"
NS = {"a": A, "p": P}
ODF = " ".join(f'xmlns:{prefix}="urn:oasis:names:tc:opendocument:xmlns:{uri}"' for prefix, uri in (
    ("office", "office:1.0"), ("style", "style:1.0"), ("text", "text:1.0"), ("draw", "drawing:1.0"),
    ("fo", "xsl-fo-compatible:1.0"), ("svg", "svg-compatible:1.0"), ("presentation", "presentation:1.0")))
STYLES = ('<office:styles><style:style style:name="Default-title" style:family="presentation">'
          '<style:paragraph-properties fo:text-align="center"/><style:text-properties '
          'fo:font-family="\'DejaVu Serif\'" fo:font-size="36pt" fo:font-style="italic" fo:color="#1f3a93"/>'
          '</style:style>'
          '<style:style style:name="Default-outline1" style:family="presentation"><style:text-properties '
          'fo:font-family="\'DejaVu Sans Mono\'" fo:font-size="26pt" fo:color="#333333"/></style:style>'
          '</office:styles><office:automatic-styles><style:style style:name="Upright" '
          'style:family="text"><style:text-properties fo:font-style="normal"/></style:style>'
          '</office:automatic-styles>')
TITLE, OUTLINE = ('<draw:frame presentation:class="title" presentation:style-name="Default-title" svg:x="1cm" '
                  'svg:y="1cm" svg:width="24cm" svg:height="3cm"{}><draw:text-box>{}</draw:text-box></draw:frame>',
                  '<draw:frame presentation:class="outline" presentation:style-name="Default-outline1" svg:x="1cm" '
                  'svg:y="5cm" svg:width="24cm" svg:height="12cm"{}><draw:text-box>{}</draw:text-box></draw:frame>')
PAGE = ('<draw:page draw:name="p{}" draw:master-page-name="Default" '
        'presentation:presentation-page-layout-name="AL1T1">{}</draw:page>')
# what a paragraph or run inherits where it names none of these, and where its style names them
DEFAULTS = {"marL": "0", "indent": "0", "algn": "l", "b": "0", "i": "0"}
PIN_ELEMENTS = {"lnSpc", "spcBef", "spcAft", "buClrTx", "buSzTx", "buFontTx", "buNone"}


@pytest.fixture(scope="module")
def deck(tmp_path_factory):
    out = tmp_path_factory.mktemp("master_styles")
    master = TITLE.format(' presentation:placeholder="true"', "") + OUTLINE.format(' presentation:placeholder="true"',
                                                                                   "")
    first = TITLE.format("", '<text:p>Quarterly review</text:p><text:p><text:span text:style-name="Upright">'
                             'Upright</text:span></text:p>') + OUTLINE.format(
        "", "<text:list><text:list-item><text:p>Revenue</text:p><text:list><text:list-item><text:p>by region</text:p>"
        "</text:list-item></text:list></text:list-item></text:list>")
    (out / "styled.fodp").write_text(
        f'<?xml version="1.0" encoding="UTF-8"?><office:document {ODF} office:version="1.2" '
        f'office:mimetype="application/vnd.oasis.opendocument.presentation">{STYLES}<office:master-styles>'
        f'<style:master-page style:name="Default">{master}</style:master-page></office:master-styles><office:body>'
        f'<office:presentation>{PAGE.format(1, first)}</office:presentation></office:body>'
        '</office:document>')
    return soffice(out / "styled.fodp", "ppt:MS PowerPoint 97", out)


def parts(result, pattern):
    with zipfile.ZipFile(result) as package:
        return {name: etree.fromstring(package.read(name)) for name in sorted(package.namelist())
                if re.fullmatch(pattern, name)}


def levels(master, style):
    found = master.find(f"p:txStyles/p:{style}Style", NS)
    return [] if found is None else list(found)


def test_libreoffice_writes_no_master_text_styles(deck, tmp_path):
    """What the mend is for: a plain soffice's .pptx has a slide master without text styles, and its layouts'
    title and body placeholders no list styles. A LibreOffice that writes them fails this test on purpose: the mend
    may then go."""
    plain = soffice(deck, "pptx", tmp_path / "plain")
    for master in parts(plain, r"ppt/slideMasters/slideMaster[0-9]+\.xml").values():
        assert master.find("p:txStyles", NS) is None
    for layout in parts(plain, r"ppt/slideLayouts/slideLayout[0-9]+\.xml").values():
        for shape in layout.iter(f"{{{P}}}sp"):
            if shape.find("p:nvSpPr/p:nvPr/p:ph", NS).get("type") not in ("dt", "ftr", "sldNum"):
                assert not shape.findall("p:txBody/a:lstStyle/*", NS)


def test_the_master_gets_the_deck_s_text_styles(office, deck, tmp_path):
    """The master's title style is the .ppt's (italic, 36 pt, DejaVu Serif, blue, centred) and so is its body
    style's first level (26 pt, DejaVu Sans Mono, grey). LibreOffice reads them back as its master's styles."""
    converted = convert.convert(office, deck, "ppt", tmp_path / "work", 60)
    (master,) = parts(converted.path, r"ppt/slideMasters/slideMaster[0-9]+\.xml").values()
    (title,) = levels(master, "title")
    assert title.get("algn") == "ctr"
    run = title.find("a:defRPr", NS)
    assert (run.get("sz"), run.get("i"), run.find("a:latin", NS).get("typeface")) == ("3600", "1", "DejaVu Serif")
    assert run.find("a:solidFill/a:srgbClr", NS).get("val").lower() == "1f3a93"
    body = levels(master, "body")
    assert etree.QName(body[0]).localname == "lvl1pPr"
    run = body[0].find("a:defRPr", NS)
    assert (run.get("sz"), run.find("a:latin", NS).get("typeface")) == ("2600", "DejaVu Sans Mono")
    assert run.find("a:solidFill/a:srgbClr", NS).get("val").lower() == "333333"
    assert converted.fidelity["complete"] is True, converted.fidelity["lost"]
    # LibreOffice, reading the result, gives a new slide the deck's title; reading a plain soffice's, its own
    plain = soffice(deck, "pptx", tmp_path / "plain")
    for result, font, size in ((converted.path, "DejaVu Serif", "36pt"), (plain, "Liberation Sans", "44pt")):
        odf = soffice(result, "fodp", tmp_path / f"odf-{font}").read_text()
        title = re.search(r'<style:style style:name="[^"]*-title" style:family="presentation".*?</style:style>', odf,
                          re.DOTALL).group()
        assert f'style:font-name="{font}"' in title and f'fo:font-size="{size}"' in title


def test_no_paragraph_takes_what_libreoffice_left_at_its_default(office, deck, tmp_path):
    """Each paragraph and run of a title or body placeholder of the slides, layouts and master names each property
    its style now sets; and the slides and layouts are LibreOffice's, but for defaults written out (the upright title
    ``i="0"``, the flush paragraph's bullet none)."""
    converted = convert.convert(office, deck, "ppt", tmp_path / "work", 60)
    plain = soffice(deck, "pptx", tmp_path / "plain")
    (master,) = parts(converted.path, r"ppt/slideMasters/slideMaster[0-9]+\.xml").values()
    styles = {(style, int(level.tag[-4]) - 1): level for style in ("title", "body") for level in levels(master, style)}
    pattern = r"ppt/(slides/slide|slideLayouts/slideLayout|slideMasters/slideMaster)[0-9]+\.xml"
    checked = 0
    for name, part in parts(converted.path, pattern).items():
        for shape in part.iter(f"{{{P}}}sp"):
            placeholder = shape.find("p:nvSpPr/p:nvPr/p:ph", NS)
            kind = None if placeholder is None else placeholder.get("type", "obj")
            style = "title" if kind in ("title", "ctrTitle") else "body" if kind in ("body", "obj") else None
            for paragraph in shape.findall("p:txBody/a:p", NS) if style else ():
                properties = paragraph.find("a:pPr", NS)
                level = styles.get((style, int(properties.get("lvl", "0"))))
                if level is None:
                    continue
                checked += 1
                assert set(level.attrib) <= set(properties.attrib), name
                named = {place(child) for child in properties}
                assert {place(child) for child in level if child.tag != f"{{{A}}}defRPr"} <= named, name
                for run in [*paragraph.findall("a:r/a:rPr", NS), *paragraph.findall("a:endParaRPr", NS)]:
                    assert set(level.find("a:defRPr", NS).attrib) <= set(run.attrib), name
    assert checked >= 6
    pins = 0
    for name, plain_part in parts(plain, r"ppt/(slides/slide|slideLayouts/slideLayout)[0-9]+\.xml").items():
        pins += within(parts(converted.path, re.escape(name))[name], plain_part, name)
    assert pins >= 1
    slide = parts(converted.path, r"ppt/slides/slide1\.xml")["ppt/slides/slide1.xml"]
    (upright,) = [run for run in slide.iter(f"{{{A}}}r") if run.findtext("a:t", namespaces=NS).startswith("Upright")]
    assert upright.find("a:rPr", NS).get("i") == "0"


def place(element):
    """The place of a paragraph property's child: a bullet's kind, colour, size and font each have one."""
    local = etree.QName(element).localname
    if local in ("buNone", "buAutoNum", "buChar", "buBlip"):
        return "bullet"
    return re.sub("(Tx|Pct|Pts)$", "", local)


def within(ours, plain, name):
    """Whether ``ours`` is ``plain`` with defaults written out: attributes at their default (``DEFAULTS``) on
    properties elements, and children saying a paragraph's spacing is nought or its bullet follows the text or is
    none. Returns how many there are; raises where anything else differs."""
    assert (ours.tag, ours.text) == (plain.tag, plain.text), name
    extra = {key: value for key, value in ours.attrib.items() if key not in plain.attrib}
    assert {key: ours.get(key) for key in plain.attrib} == dict(plain.attrib), name
    assert all(DEFAULTS.get(key) == value for key, value in extra.items()), (name, extra)
    added = len(extra)
    theirs = list(plain)
    for child in ours:
        if theirs and child.tag == theirs[0].tag:
            added += within(child, theirs.pop(0), name)
        else:
            local = etree.QName(child).localname
            assert local in PIN_ELEMENTS and etree.QName(ours).localname == "pPr", (name, local)
            assert [(etree.QName(leaf).localname, leaf.get("val")) for leaf in child] in (
                [], [("spcPts", "0")], [("spcPct", "100000")]), name
            added += 1
    assert not theirs, name
    return added


def test_pins_go_where_the_schema_puts_them():
    """A default written into a paragraph's properties goes before the children that follow its place, after those
    before; an empty properties element is opened; a style's property that some run has not got (a font) stays out
    of the style, a size every run has goes in."""
    master = (f'<p:sldMaster xmlns:p="{P}" xmlns:a="{A}"><p:cSld><p:spTree><p:sp><p:nvSpPr><p:nvPr>'
              '<p:ph type="body"/></p:nvPr></p:nvSpPr><p:txBody><a:p><a:pPr marL="300" indent="-300" algn="ctr">'
              '<a:spcBef><a:spcPts val="10"/></a:spcBef><a:buChar char="x"/></a:pPr><a:r><a:rPr sz="2000" i="1">'
              '<a:latin typeface="F"/></a:rPr><a:t>Click</a:t></a:r></a:p></p:txBody></p:sp></p:spTree></p:cSld>'
              '<p:clrMap/></p:sldMaster>').encode()
    slide = (f'<p:sld xmlns:p="{P}" xmlns:a="{A}"><p:cSld><p:spTree><p:sp><p:nvSpPr><p:nvPr><p:ph idx="1"/>'
             '</p:nvPr></p:nvSpPr><p:txBody><a:p><a:pPr><a:tabLst/></a:pPr><a:r><a:rPr sz="1000"/><a:t>One</a:t>'
             '</a:r></a:p><a:p><a:pPr indent="5" algn="r"/><a:r><a:rPr sz="1000" i="1"/><a:t>Two</a:t></a:r></a:p>'
             '</p:txBody></p:sp></p:spTree></p:cSld></p:sld>').encode()
    found = master_styles._read(master, "m")
    styles = master_styles._styles(master, found)
    inheriting = master_styles._read(slide, "s")
    master_styles._settle(styles, found + inheriting)
    (level,) = styles.values()
    assert level.run_attributes == {"sz": "2000", "i": "1"} and level.run_children == {}
    pinned = master_styles.spliced(slide, [edit for paragraph in inheriting
                                           for edit in master_styles._pins(slide, "s", paragraph, styles)])
    assert pinned.decode() == slide.decode().replace(
        '<a:pPr><a:tabLst/>', '<a:pPr marL="0" indent="0" algn="l"><a:spcBef><a:spcPts val="0"/></a:spcBef><a:buNone/>'
        '<a:tabLst/>').replace('<a:rPr sz="1000"/>', '<a:rPr sz="1000" i="0"/>').replace(
        '<a:pPr indent="5" algn="r"/>', '<a:pPr indent="5" algn="r" marL="0"><a:spcBef><a:spcPts val="0"/></a:spcBef>'
        '<a:buNone/></a:pPr>')
    styled = master_styles._text_styles(master, 0, styles, "a:").decode()
    assert styled == ('<p:txStyles><p:bodyStyle><a:lvl1pPr marL="300" indent="-300" algn="ctr"><a:spcBef>'
                      '<a:spcPts val="10"/></a:spcBef><a:buChar char="x"/><a:defRPr sz="2000" i="1"/></a:lvl1pPr>'
                      '</p:bodyStyle></p:txStyles>')


def test_a_bulleted_paragraph_without_margins_keeps_the_style_from_naming_them():
    """PowerPoint puts a bullet whose paragraph names no margin or indent at nought, LibreOffice indents it: which
    one a pin would keep is not known, so neither goes into the style; a plain paragraph's are pinned."""
    master = (f'<p:sldMaster xmlns:p="{P}" xmlns:a="{A}"><p:cSld><p:spTree><p:sp><p:nvSpPr><p:nvPr>'
              '<p:ph type="body"/></p:nvPr></p:nvSpPr><p:txBody><a:p><a:pPr marL="300" indent="-300"><a:buChar '
              'char="x"/></a:pPr><a:r><a:rPr sz="2000"/><a:t>Click</a:t></a:r></a:p></p:txBody></p:sp></p:spTree>'
              '</p:cSld><p:clrMap/></p:sldMaster>').encode()
    for paragraph, left in (('<a:pPr indent="-300"><a:buChar char="y"/></a:pPr>', {"indent": "-300"}),
                            ("<a:pPr><a:buNone/></a:pPr>", {"marL": "300", "indent": "-300"})):
        slide = (f'<p:sld xmlns:p="{P}" xmlns:a="{A}"><p:cSld><p:spTree><p:sp><p:nvSpPr><p:nvPr><p:ph idx="1"/>'
                 f'</p:nvPr></p:nvSpPr><p:txBody><a:p>{paragraph}<a:r><a:rPr sz="1000"/><a:t>One</a:t></a:r></a:p>'
                 '</p:txBody></p:sp></p:spTree></p:cSld></p:sld>').encode()
        found = master_styles._read(master, "m")
        styles = master_styles._styles(master, found)
        master_styles._settle(styles, found + master_styles._read(slide, "s"))
        assert styles[("body", 0)].attributes == left


@pytest.mark.parametrize(("size", "styled"), [("668200", False), ("99", False), ("100", True), ("400000", True)])
def test_a_style_holds_no_size_the_schema_does_not_allow(size, styled):
    """LibreOffice writes a damaged deck's prompt at 6,682 points (LibreOffice's ``hang-18.ppt``), past the 4,000
    of ST_TextFontSize: the size stays the prompt's own and goes into no style."""
    master = (f'<p:sldMaster xmlns:p="{P}" xmlns:a="{A}"><p:cSld><p:spTree><p:sp><p:nvSpPr><p:nvPr>'
              '<p:ph type="body"/></p:nvPr></p:nvSpPr><p:txBody><a:p><a:pPr marL="300"/><a:r><a:rPr '
              f'sz="{size}" b="1"/><a:t>Click</a:t></a:r></a:p></p:txBody></p:sp></p:spTree></p:cSld><p:clrMap/>'
              '</p:sldMaster>').encode()
    found = master_styles._read(master, "m")
    styles = master_styles._styles(master, found)
    master_styles._settle(styles, found)
    assert styles[("body", 0)].run_attributes == ({"sz": size, "b": "1"} if styled else {"b": "1"})


def test_libreoffice_s_slides_are_read_by_their_placeholder_shapes_as_whole(deck, tmp_path):
    """LibreOffice's own slides and layouts take the fast path (``placeholders``: their placeholder shapes parsed
    alone) and give the paragraphs, at the bytes, that parsing each part whole gives."""
    plain = soffice(deck, "pptx", tmp_path / "plain")
    with zipfile.ZipFile(plain) as package:
        names = [name for name in package.namelist() if re.fullmatch(r"ppt/(slides|slideLayouts)/[^/]+\.xml", name)]
        read = {name: package.read(name) for name in names}
    shapes = 0
    for name, data in read.items():
        alone = placeholders.documents(data)
        assert alone is not None, name
        shapes += len(alone)
        assert master_styles._read(data, name) == master_styles._parse(data, name, data, 0, []), name
    assert shapes and any(master_styles._read(data, name) for name, data in read.items())
