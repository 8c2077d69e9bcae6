"""The verbs a deck's embedded objects run in the show (``actions``): LibreOffice drops them on load, the
result gets them back, and the report counts them on both sides."""

import struct
import zipfile

import olefile
import pptx
import pytest
from conftest import ROOT
from conftest import _soffice_save as soffice
from pptx.enum.action import PP_ACTION
from pptx.enum.shapes import MSO_SHAPE_TYPE

from docshift.contract import Macros
from docshift.engine import cfb, convert, inventory, slide_actions
from docshift.engine.inventory import officeart, ppt
from docshift.engine.inventory.common import Budget
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
    frames, tree = slide_actions._shapes(data, "slide1.xml")
    assert tree == frames and [frame.present for frame in frames] == [set(), set(), {0}]
    verb = "ppaction://ole?verb="
    edited, count = slide_actions._with_actions(data, "slide1.xml", list(zip(
        frames, [{0: verb + "0"}, {0: verb + "2", 1: verb + "1"}, {0: verb + "0"}])))
    assert count == 3
    deck = edited.decode()
    assert '<p:cNvPr id="2" name="a"><a:hlinkClick' in deck and "</a:hlinkClick" not in deck
    assert deck.count('action="ppaction://ole?verb=0"') == 1
    # the click before the mouse-over, both before the extension list
    assert deck.index('verb=2"/><a:hlinkHover') < deck.index('verb=1"/><a:extLst/>')
    assert '<p:cNvPr id="4" name="c"><a:hlinkClick r:id="rId7"/></p:cNvPr>' in deck  # kept as it was
    assert [frame.present for frame in slide_actions._shapes(edited, "slide1.xml")[0]] == [{0}, {0, 1}, {0}]


def test_an_object_outside_a_frame_and_a_picture_s_own_properties_are_not_taken_for_a_frame_s():
    data = (f'<p:sld xmlns:p="{NS_P}" xmlns:a="{NS_A}" xmlns:r="{NS_R}"><p:oleObj r:id="rId1"/>'
            f'<p:graphicFrame><p:nvGraphicFramePr/>{OBJECT}</p:graphicFrame></p:sld>').encode()
    assert slide_actions._shapes(data, "slide1.xml")[0] == [None, None]
    with pytest.raises(InventoryUnreadable):
        slide_actions._shapes(b"<p:sld", "slide1.xml")


def test_the_shape_tree_gives_each_shape_its_own_place_and_a_group_s_shapes_stand_in_it():
    shape = ('<p:sp><p:nvSpPr><p:cNvPr id="{0}" name="s"/></p:nvSpPr><p:spPr><a:xfrm><a:off x="{1}" y="20"/>'
             '<a:ext cx="300" cy="40"/></a:xfrm></p:spPr></p:sp>')
    group = ('<p:grpSp><p:nvGrpSpPr><p:cNvPr id="5" name="g"/></p:nvGrpSpPr><p:grpSpPr><a:xfrm><a:off x="7" y="8"/>'
             '<a:ext cx="9" cy="10"/></a:xfrm></p:grpSpPr>' + shape.format(6, 50) + "</p:grpSp>")
    data = (f'<p:sld xmlns:p="{NS_P}" xmlns:a="{NS_A}" xmlns:r="{NS_R}"><p:cSld><p:spTree><p:nvGrpSpPr>'
            f'<p:cNvPr id="1" name=""/></p:nvGrpSpPr>{shape.format(2, 10)}{group}</p:spTree></p:cSld></p:sld>').encode()
    oles, tree = slide_actions._shapes(data, "slide1.xml")
    assert oles == [] and [found.rect for found in tree] == [(10.0, 20.0, 300.0, 40.0), (7.0, 8.0, 9.0, 10.0)]
    assert [data[found.at:found.at + 13] for found in tree] == [b'<p:cNvPr id="', b'<p:cNvPr id="'] and \
        data[tree[1].at:].startswith(b'<p:cNvPr id="5"')


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


def record(rec_type, body, instance=0, version=0):
    return struct.pack("<HHI", version | instance << 4, rec_type, len(body)) + body


def with_macro_button(deck, out, shape_index, macro, instance=0):
    """``deck`` saved again as PowerPoint saves a change (a new SlideContainer for the first slide, a persist
    directory that points at it and a UserEditAtom that names the save before), its ``shape_index``-th shape given
    a MouseClick (instance 0) or MouseOver (1) InteractiveInfo that runs ``macro``, as Action Settings writes it."""
    with olefile.OleFileIO(str(deck)) as ole:
        streams = {tuple(path): ole.openstream(path).read() for path in ole.listdir()}
    doc, current = bytearray(streams[("PowerPoint Document",)]), streams[("Current User",)]
    show = ppt._Presentation(bytes(doc), current, Budget())
    slide_ref = show._listed(0)[0][0]
    start = show.directory[slide_ref]
    slide = bytearray(doc[start:start + 8 + struct.unpack_from("<I", doc, start + 4)[0]])
    # the path of containers down to the shape's client data, and that data's end
    shapes = [(body, stop, depth) for rec_type, _, _, body, stop, depth in
              officeart.walk(slide, 8, len(slide), Budget()) if rec_type == officeart.OA_SP]
    body, stop, _ = shapes[shape_index]
    client_at, client = next((child_body - 8, child_stop) for child, _, _, child_body, child_stop
                             in officeart.children(slide, body, stop, Budget()) if child == 0xF011)
    info = record(0x0FF2, record(0x0FF3, struct.pack("<IIBBBBB3x", 0, 0, 1, 0, 0, 0, 0xFF))
                  + record(0x0FBA, macro.encode("utf_16_le"), instance=2), instance=instance, version=0xF)
    # the client data and every container that holds it grow by the new record, the slide's own too
    holding = [body - 8 for _, _, version, body, stop, _ in officeart.walk(slide, 8, len(slide), Budget())
               if version == 0xF and body - 8 <= client_at and stop >= client]
    for at in [0, *holding]:
        struct.pack_into("<I", slide, at + 4, struct.unpack_from("<I", slide, at + 4)[0] + len(info))
    slide[client:client] = info
    live = struct.unpack_from("<I", current, 16)[0]
    edit = bytearray(doc[live:live + 8 + struct.unpack_from("<I", doc, live + 4)[0]])
    placed = len(doc)
    doc += slide
    directory_at = len(doc)
    doc += record(0x1772, struct.pack("<II", slide_ref | 1 << 20, placed))
    struct.pack_into("<II", edit, 16, live, directory_at)  # offsetLastEdit, offsetPersistDirectory
    edit_at = len(doc)
    doc += edit
    current = bytearray(current)
    struct.pack_into("<I", current, 16, edit_at)
    streams[("PowerPoint Document",)], streams[("Current User",)] = bytes(doc), bytes(current)
    out.write_bytes(cfb.write(tree(streams)))
    return out


def tree(streams):
    """The root storage of a compound file holding ``streams`` ({path: bytes})."""
    root = cfb.Entry("Root Entry")
    for path, data in sorted(streams.items()):
        parent = root
        for storage in path[:-1]:
            parent = next((child for child in parent.children if child.name == storage), None) or \
                parent.children.append(cfb.Entry(storage)) or parent.children[-1]
        parent.children.append(cfb.Entry(path[-1], data))
    return root


def test_a_button_that_runs_a_macro_runs_it_in_the_macro_enabled_result(office, tmp_path):
    """SimpleMacro.ppt's subtitle made a button that runs its TestMacro on a click, as PowerPoint saves such a
    change: a plain soffice's .pptm has the module, but the button does nothing; docshift's runs it."""
    deck = with_macro_button(CORPUS / "SimpleMacro.ppt", tmp_path / "button.ppt", 2, "TestMacro")
    held = inventory.of_source(deck, "ppt")
    assert held.where["actions"] == ["slide 1"] and held.macro_actions == ["slide 1"]
    assert held.counts["characters"] == inventory.of_source(CORPUS / "SimpleMacro.ppt", "ppt").counts["characters"]
    plain = soffice(deck, "pptm", tmp_path / "plain")
    assert b"ppaction://macro" not in zipfile.ZipFile(plain).read("ppt/slides/slide1.xml")

    converted = convert.convert(office, deck, "ppt", tmp_path / "work", 60)
    assert converted.path.suffix == ".pptm"
    shapes = pptx.Presentation(str(converted.path)).slides[0].shapes
    clicks = [(shape.text_frame.text if shape.has_text_frame else None, shape.click_action.action) for shape in shapes]
    assert clicks == [("This is a macro slideshow!!", PP_ACTION.NONE), ("subtitle", PP_ACTION.RUN_MACRO)]
    assert b'action="ppaction://macro?name=TestMacro"' in zipfile.ZipFile(converted.path).read(
        "ppt/slides/slide1.xml")
    assert converted.fidelity["counts"]["actions"] == {"source": 1, "result": 1}
    assert converted.fidelity["complete"] is True, converted.fidelity["lost"]

    # the macros removed on request: the action goes with them, and the report says so without a loss
    removed = convert.convert(office, deck, "ppt", tmp_path / "removed", 60, macros=Macros.REMOVE)
    assert removed.path.suffix == ".pptx"
    assert b"ppaction://macro" not in zipfile.ZipFile(removed.path).read("ppt/slides/slide1.xml")
    assert removed.fidelity["counts"]["actions"] == {"source": 1, "result": 0}
    assert {"what": "actions", "count": 1, "detail": "1 macro action removed on request"} in removed.fidelity["lost"]
    assert removed.fidelity["complete"] is True, removed.fidelity["lost"]


def test_a_mouse_over_that_runs_a_macro_is_read_as_the_shape_s_hover(tmp_path):
    """The same change with the mouse passing over the title (a MouseOver InteractiveInfo, recInstance 1): the
    source counts it, as the action a .pptx writes in the shape's ``a:hlinkHover``."""
    deck = with_macro_button(CORPUS / "SimpleMacro.ppt", tmp_path / "hover.ppt", 1, "TestMacro", instance=1)
    show = ppt._Presentation.of_file(deck)
    title = next(shape for shape in show.shapes(show.slide_containers()[0]) if shape.placeholder == 15)
    assert title.actions == {1: "ppaction://macro?name=TestMacro"}
    assert inventory.of_source(deck, "ppt").macro_actions == ["slide 1"]
