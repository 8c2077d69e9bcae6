"""A slide's placeholder shapes parsed alone (``docshift/engine/placeholders.py``), for ``master_styles``.

Each test compares ``master_styles._read`` of a slide with the parse of the whole part (``_parse``, what ``_read``
did for every slide before): the same paragraphs, at the same bytes of the part. The slides are written as
LibreOffice writes them: every prefix declared on the root, PresentationML as ``p``.
"""

from docshift.engine import master_styles, placeholders

A = "http://schemas.openxmlformats.org/drawingml/2006/main"
P = "http://schemas.openxmlformats.org/presentationml/2006/main"
R = "http://schemas.openxmlformats.org/officeDocument/2006/relationships"
MC = "http://schemas.openxmlformats.org/markup-compatibility/2006"
P14 = "http://schemas.microsoft.com/office/powerpoint/2010/main"


def placeholder(kind, *texts, attributes=""):
    paragraphs = "".join(f'<a:p><a:pPr lvl="{level}"/><a:r><a:rPr lang="en-US" sz="2400"/><a:t>{text}</a:t></a:r>'
                         '<a:endParaRPr lang="en-US"/></a:p>' for level, text in enumerate(texts))
    return (f'<p:sp{attributes}><p:nvSpPr><p:cNvPr id="2" name="{kind}"/><p:cNvSpPr/><p:nvPr><p:ph type="{kind}"/>'
            '</p:nvPr></p:nvSpPr><p:spPr><a:xfrm><a:off x="0" y="0"/><a:ext cx="10" cy="10"/></a:xfrm></p:spPr>'
            f'<p:txBody><a:bodyPr/><a:lstStyle/>{paragraphs}</p:txBody></p:sp>')


PICTURE = ('<p:pic><p:nvPicPr><p:cNvPr id="3" name="Picture"/><p:cNvPicPr/><p:nvPr/></p:nvPicPr><p:blipFill>'
           '<a:blip r:embed="rId2"/><a:stretch><a:fillRect/></a:stretch></p:blipFill><p:spPr/></p:pic>')
FREE_SHAPE = ('<p:sp><p:nvSpPr><p:cNvPr id="4" name="Note"/><p:cNvSpPr/><p:nvPr/></p:nvSpPr><p:spPr/><p:txBody>'
              '<a:bodyPr/><a:p><a:r><a:rPr lang="en-US"/><a:t>Not a placeholder</a:t></a:r></a:p></p:txBody></p:sp>')


def slide(*shapes, declarations=f' xmlns:a="{A}" xmlns:r="{R}" xmlns:p="{P}"'):
    return (f'<?xml version="1.0" encoding="UTF-8" standalone="yes"?>\n<p:sld{declarations}><p:cSld><p:spTree>'
            '<p:nvGrpSpPr><p:cNvPr id="1" name=""/><p:cNvGrpSpPr/><p:nvPr/></p:nvGrpSpPr><p:grpSpPr/>'
            f'{"".join(shapes)}</p:spTree></p:cSld><p:clrMapOvr><a:masterClrMapping/></p:clrMapOvr></p:sld>').encode()


def whole(data):
    return master_styles._parse(data, "ppt/slides/slide1.xml", data, 0, [])


def test_only_the_placeholders_shapes_are_parsed_and_their_paragraphs_are_the_whole_part_s():
    data = slide(PICTURE, placeholder("title", "Quarterly review"), FREE_SHAPE,
                 f'<p:grpSp><p:nvGrpSpPr/><p:grpSpPr/>{placeholder("body", "Revenue", "by region")}</p:grpSp>')
    documents = placeholders.documents(data)
    assert len(documents) == 2
    assert all(b"Not a placeholder" not in document and b"<p:pic>" not in document for document, _ in documents)
    read = master_styles._read(data, "ppt/slides/slide1.xml")
    assert [(paragraph.style, paragraph.level) for paragraph in read] == [("title", 0), ("body", 0), ("body", 1)]
    assert read == whole(data)
    for paragraph in read:  # each position is the part's own
        assert data[paragraph.start:].startswith(b"<a:p>")
        assert data[paragraph.properties:].startswith(b'<a:pPr lvl="')
        assert all(data[run.start:].startswith((b"<a:rPr", b"<a:endParaRPr")) for run in paragraph.runs)


def test_a_shape_written_empty_takes_the_next_one_in_with_it():
    data = slide("<p:sp/>", placeholder("title", "After an empty shape"))
    assert len(placeholders.documents(data)) == 1
    assert master_styles._read(data, "s") == whole(data) != []


def test_a_part_whose_prefixes_may_mean_otherwise_is_parsed_whole():
    body = placeholder("body", "Text")
    refused = {
        "a default namespace": slide(body, declarations=f' xmlns="{P}" xmlns:a="{A}" xmlns:p="{P}"'),
        "a prefix bound again": slide(f'<p:grpSp xmlns:a="urn:other"><p:nvGrpSpPr/><p:grpSpPr/>{body}</p:grpSp>'),
        "PresentationML under another prefix": slide(body.replace("p:", "pml:"),
                                                     declarations=f' xmlns:a="{A}" xmlns:p="{P}" xmlns:pml="{P}"'),
        "a shape not closed": slide(body).replace(b"</p:sp>", b""),
    }
    for why, data in refused.items():
        assert placeholders.documents(data) is None, why
    # bound again to another namespace, "a:" is not DrawingML there: the whole part's parse finds no paragraph
    data = refused["a prefix bound again"]
    assert master_styles._read(data, "s") == whole(data) == []


def test_a_shape_using_a_prefix_its_ancestor_declares_is_read_from_the_whole_part():
    """A prefix declared between the root and the shape (Office 2010's p14 on an mc:AlternateContent) is unbound in
    the shape's own document: that parse fails, and the part is parsed whole."""
    shape = placeholder("title", "Transition", attributes=' p14:modId="1"')
    data = slide(f'<mc:AlternateContent xmlns:mc="{MC}" xmlns:p14="{P14}"><mc:Choice Requires="p14">{shape}'
                 '</mc:Choice></mc:AlternateContent>')
    assert len(placeholders.documents(data)) == 1
    read = master_styles._read(data, "s")
    assert read == whole(data) and [paragraph.style for paragraph in read] == ["title"]
