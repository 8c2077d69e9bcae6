"""The verbs a deck's embedded objects run in the show (``actions``): LibreOffice drops them on load, the
result gets them back, and the report counts them on both sides."""

import zipfile

import pptx
import pytest
from conftest import ROOT
from conftest import _soffice_save as soffice
from pptx.enum.action import PP_ACTION
from pptx.enum.shapes import MSO_SHAPE_TYPE

from docshift.engine import convert, inventory, slide_actions
from docshift.engine.inventory.package import NS_A, NS_P, NS_R
from docshift.errors import InventoryUnreadable

CORPUS = ROOT.parent / "shared" / "corpus" / "ppt"
VERB = "ppaction://ole?verb=0"


def actions(path):
    """[(slide number, ProgID, the click's action, its address)] of each OLE object of the deck at ``path``."""
    found = []
    for number, slide in enumerate(pptx.Presentation(str(path)).slides, 1):
        for shape in slide.shapes:
            if shape.shape_type == MSO_SHAPE_TYPE.EMBEDDED_OLE_OBJECT:
                click = shape.click_action
                found.append((number, shape.ole_format.prog_id, click.action, click.hyperlink.address))
    return found


def test_the_source_counts_the_verbs_its_objects_run_slide_by_slide():
    """ppt_with_embeded.ppt shows six objects on one slide, and its two PowerPoint decks run their first verb on a
    click; ParagraphStylesShorterThanCharStyles.ppt has a chart or sheet on five slides, each run on a click."""
    held = inventory.of_source(CORPUS / "ppt_with_embeded.ppt", "ppt")
    assert held.counts["actions"] == 2 and held.where["actions"] == ["slide 1", "slide 1"]
    held = inventory.of_source(CORPUS / "ParagraphStylesShorterThanCharStyles.ppt", "ppt")
    assert held.where["actions"] == ["slide 3", "slide 4", "slide 5", "slide 6", "slide 13"]
    # a deck whose objects run nothing, and one whose shapes link to pages instead
    assert inventory.of_source(CORPUS / "42520.ppt", "ppt").counts["actions"] == 0


def test_libreoffice_drops_them_and_the_result_has_them_again(office, tmp_path):
    deck = CORPUS / "ppt_with_embeded.ppt"
    plain = soffice(deck, "pptx", tmp_path / "plain")
    assert [action for _, _, action, _ in actions(plain)] == [PP_ACTION.NONE] * 6
    plain_report = inventory.report(inventory.of_source(deck, "ppt"), inventory.of_result(plain, "ppt"))
    assert plain_report["counts"]["actions"] == {"source": 2, "result": 0}
    assert {"what": "actions", "count": 2, "detail": "2 of 2 actions are missing; missing: slide 1 (2)"} \
        in plain_report["lost"]

    converted = convert.convert(office, deck, "ppt", tmp_path / "work", 60)
    found = actions(converted.path)
    # the two decks run their verb, the documents and sheets nothing (LibreOffice names them as OOXML objects)
    assert [(prog_id.rsplit(".", 1)[0], action) for _, prog_id, action, _ in found] == [
        ("Word.Document", PP_ACTION.NONE), ("Word.Document", PP_ACTION.NONE),
        ("PowerPoint.Show", PP_ACTION.OLE_VERB), ("PowerPoint.Show", PP_ACTION.OLE_VERB),
        ("Excel.Sheet", PP_ACTION.NONE), ("Excel.Sheet", PP_ACTION.NONE)]
    assert all(address is None for *_, address in found)  # an action, no link
    with zipfile.ZipFile(converted.path) as package:
        assert package.read("ppt/slides/slide1.xml").count(f'action="{VERB}"'.encode()) == 2
    assert converted.fidelity["counts"]["actions"] == {"source": 2, "result": 2}
    assert converted.fidelity["complete"] is True, converted.fidelity["lost"]


def slide(*frames):
    """A slide's XML holding ``frames`` (each the inside of a p:graphicFrame's p:nvGraphicFramePr and its object)."""
    return (f'<p:sld xmlns:p="{NS_P}" xmlns:a="{NS_A}" xmlns:r="{NS_R}"><p:cSld><p:spTree>'
            + "".join(f"<p:graphicFrame>{frame}</p:graphicFrame>" for frame in frames)
            + "</p:spTree></p:cSld></p:sld>").encode()


OBJECT = ('<a:graphic><a:graphicData><p:oleObj r:id="rId1"><p:embed/><p:pic><p:nvPicPr><p:cNvPr id="9" name="i"/>'
          '</p:nvPicPr></p:pic></p:oleObj></a:graphicData></a:graphic>')


def test_each_frame_gets_its_verbs_first_among_its_children_and_one_with_an_action_keeps_its_own():
    empty = '<p:nvGraphicFramePr><p:cNvPr id="2" name="a"/></p:nvGraphicFramePr>' + OBJECT
    ended = '<p:nvGraphicFramePr><p:cNvPr id="3" name="b"><a:extLst/></p:cNvPr></p:nvGraphicFramePr>' + OBJECT
    linked = ('<p:nvGraphicFramePr><p:cNvPr id="4" name="c"><a:hlinkClick r:id="rId7"/></p:cNvPr>'
              '</p:nvGraphicFramePr>' + OBJECT)
    data = slide(empty, ended, linked)
    frames = slide_actions._frames(data, "slide1.xml")
    assert [present for _, present in frames] == [set(), set(), {0}]
    edited, count = slide_actions._with_actions(
        data, "slide1.xml", list(zip(frames, [{0: 0}, {0: 2, 1: 1}, {0: 0}])))
    assert count == 3
    deck = edited.decode()
    assert '<p:cNvPr id="2" name="a"><a:hlinkClick' in deck and "</a:hlinkClick" not in deck
    assert deck.count('action="ppaction://ole?verb=0"') == 1
    # the click before the mouse-over, both before the extension list
    assert deck.index('verb=2"/><a:hlinkHover') < deck.index('verb=1"/><a:extLst/>')
    assert '<p:cNvPr id="4" name="c"><a:hlinkClick r:id="rId7"/></p:cNvPr>' in deck  # kept as it was
    assert [present for _, present in slide_actions._frames(edited, "slide1.xml")] == [{0}, {0, 1}, {0}]


def test_an_object_outside_a_frame_and_a_picture_s_own_properties_are_not_taken_for_a_frame_s():
    data = (f'<p:sld xmlns:p="{NS_P}" xmlns:a="{NS_A}" xmlns:r="{NS_R}"><p:oleObj r:id="rId1"/>'
            f'<p:graphicFrame><p:nvGraphicFramePr/>{OBJECT}</p:graphicFrame></p:sld>').encode()
    assert slide_actions._frames(data, "slide1.xml") == [None, None]
    with pytest.raises(InventoryUnreadable):
        slide_actions._frames(b"<p:sld", "slide1.xml")


def test_a_result_counts_the_verbs_its_frames_run(tmp_path):
    made = pptx.Presentation()
    page = made.slides.add_slide(made.slide_layouts[6])
    box = page.shapes.add_textbox(0, 0, 100, 100)
    box.click_action.hyperlink.address = "https://example.com/"
    made.save(tmp_path / "made.pptx")
    with zipfile.ZipFile(tmp_path / "made.pptx") as package:
        parts = {name: package.read(name) for name in package.namelist()}
    tree_end = parts["ppt/slides/slide1.xml"].rindex(b"</p:spTree>")
    frame = (f'<p:graphicFrame><p:nvGraphicFramePr><p:cNvPr id="20" name="o"><a:hlinkClick r:id="" action="{VERB}"/>'
             f'<a:hlinkHover r:id="" action="ppaction://ole?verb=1"/></p:cNvPr><p:cNvGraphicFramePr/><p:nvPr/>'
             f'</p:nvGraphicFramePr><p:xfrm><a:off x="0" y="0"/><a:ext cx="1" cy="1"/></p:xfrm><a:graphic>'
             f'<a:graphicData uri="http://schemas.openxmlformats.org/presentationml/2006/ole"/></a:graphic>'
             f'</p:graphicFrame>').encode()
    xml = parts["ppt/slides/slide1.xml"]
    parts["ppt/slides/slide1.xml"] = xml[:tree_end] + frame + xml[tree_end:]
    with zipfile.ZipFile(tmp_path / "acting.pptx", "w") as package:
        for name, data in parts.items():
            package.writestr(name, data)
    held = inventory.of_result(tmp_path / "acting.pptx", "ppt")
    assert held.counts["actions"] == 2 and held.where["actions"] == ["slide 1", "slide 1"]
    assert held.counts["hyperlinks"] == 1  # the text box's link; an action is no hyperlink
