"""Every embedded object of a .ppt reaches the .pptx with its own part: LibreOffice's export numbers them per
slide, so objects on different slides share one part and only one survives (``docshift/engine/objects.py``); and
it loads an object whose server it does not know, a packaged file, as its picture only, on a slide
(``docshift/engine/slide_pictures.py``) and in a .doc's text (``docshift/engine/word_objects.py``).

Made here: a .ppt with an embedded workbook on each of three slides, each workbook saying which slide it is on;
and the same deck with slide 1's object replaced by a packaged text file, as an incremental save of PowerPoint
writes it (a new ExOleObjStg record, persist directory and UserEditAtom after the others); and a .doc with two
embedded workbooks in its text, the first one's storage in the ObjectPool replaced by a packaged text file as the
Packager stores one (its Ole10Native and ObjInfo streams, no CompObj).
"""

import io
import posixpath
import re
import shutil
import struct
import uuid
import zipfile
import zlib
from pathlib import Path

import docx
import olefile
import pptx
import pytest
import xlrd
from conftest import ROOT, flat_odf
from conftest import _soffice_save as soffice
from oletools import ppt_record_parser

from docshift.engine import cfb, convert, decrypt, inventory, objects, word_objects
from docshift.engine.inventory import ppt

SLIDES = 3
OLE_CONTENT_TYPE = "application/vnd.openxmlformats-officedocument.oleObject"
PACKAGE_CLSID = uuid.UUID("0003000C-0000-0000-C000-000000000046").bytes_le
PACKAGED = b"a file packaged on slide 1\r\n"


def _frame(n):
    return (f'<draw:page draw:name="page{n}"><draw:frame draw:name="Sheet{n}" svg:x="{n}cm" svg:y="2cm" '
            'svg:width="8cm" svg:height="3cm"><draw:object><office:document office:version="1.2" '
            'office:mimetype="application/vnd.oasis.opendocument.spreadsheet"><office:body><office:spreadsheet>'
            f'<table:table table:name="Inner{n}"><table:table-row><table:table-cell office:value-type="string">'
            f'<text:p>object on slide {n}</text:p></table:table-cell></table:table-row></table:table>'
            '</office:spreadsheet></office:body></office:document></draw:object></draw:frame></draw:page>')


@pytest.fixture(scope="module")
def three_objects(tmp_path_factory):
    """A .ppt with an embedded workbook on each of three slides (LibreOffice writes them as Excel 97 storages)."""
    out = tmp_path_factory.mktemp("objects")
    (out / "three.fodp").write_text(flat_odf("presentation", "".join(_frame(n) for n in range(1, SLIDES + 1))))
    return soffice(out / "three.fodp", "ppt:MS PowerPoint 97", out, "OpenDocument Presentation Flat XML")


def source_storages(path):
    """The storages of the .ppt's ExOleObjStg records, inflated, read by oletools (not docshift's reader)."""
    found = []
    ppt = ppt_record_parser.PptFile(str(path))
    try:
        for stream in ppt.iter_streams():
            if stream.name != "PowerPoint Document":  # the one stream of records; persist objects are top level
                continue
            for record in stream.iter_records(fill_data=True):
                if isinstance(record, ppt_record_parser.PptRecordExOleVbaActiveXAtom):
                    found.append(b"".join(record.iter_uncompressed()))
    finally:
        ppt.close()
    return found


def slide_objects(path):
    """[(slide number, embedded part, its bytes, ProgID)] of each p:oleObj, read from the package's XML."""
    found = []
    with zipfile.ZipFile(path) as package:
        names = package.namelist()
        assert len(names) == len(set(names))
        for n in range(1, SLIDES + 1):
            slide = package.read(f"ppt/slides/slide{n}.xml").decode()
            rels = package.read(f"ppt/slides/_rels/slide{n}.xml.rels").decode()
            for tag in re.findall(r"<p:oleObj [^>]*>", slide):
                rid = re.search(r'r:id="([^"]+)"', tag).group(1)
                rel = re.search(rf'<Relationship [^>]*Id="{rid}"[^>]*>', rels).group(0)
                target = re.search(r'Target="([^"]+)"', rel).group(1)
                part = posixpath.normpath(posixpath.join("ppt/slides", target))
                prog = re.search(r'progId="([^"]*)"', tag)
                found.append((n, part, package.read(part), prog and prog.group(1)))
    return found


def test_objects_on_three_slides_each_keep_their_own_part(three_objects, office, tmp_path):
    storages = source_storages(three_objects)
    assert len(storages) == SLIDES and len(set(storages)) == SLIDES  # three different workbooks in the source
    assert inventory.of_source(three_objects, "ppt").counts["embedded_objects"] == SLIDES
    # what LibreOffice itself writes: one part for the three (the loss mended here)
    plain = soffice(three_objects, "pptx", tmp_path / "plain")
    assert len({part for _, part, _, _ in slide_objects(plain)}) < SLIDES

    converted = convert.convert(office, three_objects, "ppt", tmp_path / "work", 60)
    found = slide_objects(converted.path)
    assert [n for n, _, _, _ in found] == [1, 2, 3]
    assert len({part for _, part, _, _ in found}) == SLIDES
    for n, _, data, prog_id in found:
        assert data in storages  # the source's own storage, byte for byte
        sheet = xlrd.open_workbook(file_contents=data).sheet_by_index(0)
        assert sheet.cell_value(0, 0) == f"object on slide {n}"
        assert prog_id and prog_id.startswith("Excel.Sheet")
    with zipfile.ZipFile(converted.path) as package:
        types = package.read("[Content_Types].xml").decode()
        for _, part, _, _ in found:
            assert f'PartName="/{part}" ContentType="{OLE_CONTENT_TYPE}"' in types
        assert not [name for name in package.namelist()
                    if name.startswith("ppt/embeddings/") and name not in {part for _, part, _, _ in found}]
        rels = "".join(package.read(f"ppt/slides/_rels/slide{n}.xml.rels").decode() for n in (1, 2, 3))
        assert rels.count("relationships/image") == SLIDES  # each keeps its replacement image
    assert converted.fidelity["counts"]["embedded_objects"] == {"source": SLIDES, "result": SLIDES}
    assert converted.fidelity["complete"] is True, converted.fidelity["lost"]

    # python-pptx and LibreOffice open it again, with each slide's own object
    deck = pptx.Presentation(str(converted.path))
    blobs = [shape.ole_format.blob for slide in deck.slides for shape in slide.shapes if shape.shape_type == 7]
    assert blobs == [data for _, _, data, _ in found]
    reloaded = soffice(converted.path, "odp", tmp_path / "reload")
    with zipfile.ZipFile(reloaded) as odp:
        content = odp.read("content.xml").decode()
        hrefs = re.findall(r'<draw:object(?:-ole)? [^>]*xlink:href="\./([^"]+)"', content)
        assert len(set(hrefs)) == SLIDES
        texts = sorted(xlrd.open_workbook(file_contents=odp.read(href)).sheet_by_index(0).cell_value(0, 0)
                       for href in hrefs if olefile.isOleFile(odp.read(href)))
    assert texts == [f"object on slide {n}" for n in (1, 2, 3)]


def test_a_result_without_shared_parts_is_left_as_it_is(three_objects, tmp_path):
    """An export whose objects each have a part already (here, one mended before) is not written again."""
    plain = soffice(three_objects, "pptx", tmp_path)
    assert objects.mend(plain, three_objects, "ppt") == SLIDES
    before = plain.read_bytes()
    assert objects.mend(plain, three_objects, "ppt") == 0
    assert plain.read_bytes() == before


def test_a_mended_slide_keeps_every_byte_but_its_objects_tags(three_objects, tmp_path):
    """The slide and relationships a mend edits are written again tag by tag, not as a DOM: an alternative text's
    line break (a character reference in an attribute, which a DOM written out turns into a space) and every other
    byte stay as LibreOffice wrote them; only each p:oleObj's progId and each moved relationship change."""
    plain = soffice(three_objects, "pptx", tmp_path)
    slide = "ppt/slides/slide2.xml"
    described = edited(plain, tmp_path / "described.pptx", slide,
                       lambda data: data.replace(b"<p:cNvPr ", b'<p:cNvPr descr="first line&#13;&#10;second" ', 1))
    with zipfile.ZipFile(described) as package:
        before = {name: package.read(name) for name in (slide, "ppt/slides/_rels/slide2.xml.rels")}
    assert objects.mend(described, three_objects, "ppt") == SLIDES
    with zipfile.ZipFile(described) as package:
        after = {name: package.read(name) for name in before}
    assert b'descr="first line&#13;&#10;second"' in after[slide]

    def outside(data, tag):
        return re.sub(rb"<" + tag + rb"\s[^>]*>", b"<>", data)

    assert outside(after[slide], b"p:oleObj") == outside(before[slide], b"p:oleObj")
    assert outside(after[slide], b"p:oleObj") != after[slide]
    assert b"progId=" in after[slide]
    rels = "ppt/slides/_rels/slide2.xml.rels"
    assert outside(after[rels], b"Relationship") == outside(before[rels], b"Relationship")
    assert after[rels] != before[rels] and b"../embeddings/" in after[rels]


def test_a_source_that_does_not_read_leaves_the_export_as_it_is(three_objects, tmp_path):
    """Objects cannot be told apart without the source's records: the export stays as LibreOffice wrote it."""
    plain = soffice(three_objects, "pptx", tmp_path)
    before = plain.read_bytes()
    broken = tmp_path / "broken.ppt"
    shutil.copy(three_objects, broken)
    with broken.open("r+b") as handle:  # the compound file's header gone: no stream to read
        handle.write(b"\0" * 512)
    assert objects.mend(plain, broken, "ppt") == 0
    assert plain.read_bytes() == before


def _master(name, x):
    frame = _frame(0).replace('<draw:page draw:name="page0">', "").replace("</draw:page>", "")
    frame = frame.replace("Sheet0", f"On{name}").replace("Inner0", f"Inner{name}")
    frame = frame.replace('svg:x="0cm"', f'svg:x="{x}cm"')
    return (f'<style:master-page style:name="{name}" style:page-layout-name="PM1" draw:style-name="Mdp1">'
            + frame.replace("object on slide 0", f"object on master {name}") + "</style:master-page>")


@pytest.fixture(scope="module")
def master_objects(tmp_path_factory):
    """A .ppt with two masters, each with an embedded workbook saying which master it is on; slides 1 and 3 use
    the first, slide 2 the second."""
    out = tmp_path_factory.mktemp("masters")
    pages = "".join(f'<draw:page draw:name="p{n}" draw:master-page-name="{master}"/>'
                    for n, master in ((1, "First"), (2, "Second"), (3, "First")))
    styles = ('<office:styles/><office:automatic-styles><style:style style:name="Mdp1" style:family="drawing-page"/>'
              '<style:page-layout style:name="PM1"><style:page-layout-properties fo:page-width="28cm" '
              'fo:page-height="21cm"/></style:page-layout></office:automatic-styles>'
              f'<office:master-styles>{_master("First", 1)}{_master("Second", 10)}</office:master-styles>')
    document = flat_odf("presentation", pages).replace("<office:body>", styles + "<office:body>").replace(
        "xmlns:svg=", 'xmlns:style="urn:oasis:names:tc:opendocument:xmlns:style:1.0" '
        'xmlns:fo="urn:oasis:names:tc:opendocument:xmlns:xsl-fo-compatible:1.0" xmlns:svg=')
    (out / "masters.fodp").write_text(document)
    return soffice(out / "masters.fodp", "ppt:MS PowerPoint 97", out, "OpenDocument Presentation Flat XML")


def layout_objects(path):
    """{layout part: [the workbook text of each of its p:oleObj's parts]}, and the layout each slide uses."""
    with zipfile.ZipFile(path) as package:
        layouts, used = {}, []
        for name in sorted(package.namelist()):
            match = re.fullmatch(r"ppt/(slides|slideLayouts)/_rels/(\w+\.xml)\.rels", name)
            if not match:
                continue
            rels = package.read(name).decode()
            if match.group(1) == "slides":
                used.append(re.search(r'Target="\.\./slideLayouts/(\w+\.xml)"', rels).group(1))
                continue
            texts = []
            for rid in re.findall(r'<p:oleObj [^>]*r:id="([^"]+)"', package.read(f"ppt/slideLayouts/{match.group(2)}")
                                  .decode()):
                target = re.search(rf'Id="{rid}"[^>]*Target="\.\./embeddings/([^"]+)"|'
                                   rf'Target="\.\./embeddings/([^"]+)"[^>]*Id="{rid}"', rels)
                data = package.read("ppt/embeddings/" + (target.group(1) or target.group(2)))
                texts.append(_first_cell(data))
            layouts[match.group(2)] = texts
    return layouts, used


def _first_cell(data):
    """The first cell of the workbook storage ``data``, or what else it is."""
    if not olefile.isOleFile(data):
        return "not a storage"
    try:
        return xlrd.open_workbook(file_contents=data).sheet_by_index(0).cell_value(0, 0)
    except xlrd.XLRDError:
        return "not a workbook"


def test_objects_on_two_masters_each_keep_their_own_part(master_objects, office, tmp_path):
    """LibreOffice writes a master's objects onto each of its layouts, numbered as a slide's: the two masters'
    objects share one part, and every layout shows the same workbook."""
    assert inventory.of_source(master_objects, "ppt").counts["embedded_objects"] == 2
    plain_layouts, _ = layout_objects(soffice(master_objects, "pptx", tmp_path / "plain"))
    assert len({text for texts in plain_layouts.values() for text in texts}) == 1  # the loss mended here

    converted = convert.convert(office, master_objects, "ppt", tmp_path / "work", 60)
    layouts, used = layout_objects(converted.path)
    # each slide's layout (slides 1 and 3 have layouts of their own: a title slide's and another) shows its master's
    assert [layouts[layout] for layout in used] == [["object on master First"], ["object on master Second"],
                                                    ["object on master First"]]
    assert converted.fidelity["counts"]["embedded_objects"] == {"source": 2, "result": 2}
    assert converted.fidelity["complete"] is True, converted.fidelity["lost"]
    with zipfile.ZipFile(converted.path) as package:
        assert not [name for name in package.namelist() if name.startswith("ppt/embeddings/")
                    and f'PartName="/{name}"' not in package.read("[Content_Types].xml").decode()]
    # python-pptx and LibreOffice open it again, each master with its own object
    deck = pptx.Presentation(str(converted.path))
    assert sum(shape.shape_type == 7 for layout in deck.slide_layouts for shape in layout.shapes) == len(layouts)
    with zipfile.ZipFile(soffice(converted.path, "odp", tmp_path / "reload")) as odp:
        hrefs = re.findall(r'<draw:object(?:-ole)? [^>]*xlink:href="\./([^"]+)"', odp.read("styles.xml").decode())
        texts = {xlrd.open_workbook(file_contents=odp.read(href)).sheet_by_index(0).cell_value(0, 0)
                 for href in hrefs if olefile.isOleFile(odp.read(href))}
    assert texts == {"object on master First", "object on master Second"}


def test_a_master_s_packaged_file_that_libreoffice_made_a_picture_is_an_object_again(master_objects, office,
                                                                                      tmp_path):
    """A master's object whose server LibreOffice does not know is a picture on each of the master's layouts."""
    legacy = objects._source_objects(master_objects)
    first = legacy.masters[legacy.slide_masters[0]][0].object_ref
    storage = package_storage("notes.txt", PACKAGED)
    deck = with_storage(master_objects, first, storage, tmp_path / "packaged-master.ppt")
    plain, plain_used = layout_objects(soffice(deck, "pptx", tmp_path / "plain"))
    assert [len(plain[layout]) for layout in plain_used] == [0, 1, 0]  # the first master's: a picture, no object

    converted = convert.convert(office, deck, "ppt", tmp_path / "work", 60)
    layouts, used = layout_objects(converted.path)
    # the second master's object, alone in its part, stays as LibreOffice wrote it: an .xlsx
    assert [layouts[layout] for layout in used] == [["not a workbook"], ["not a storage"], ["not a workbook"]]
    with zipfile.ZipFile(converted.path) as package:
        for layout in (used[0], used[2]):
            rels = package.read(f"ppt/slideLayouts/_rels/{layout}.rels").decode()
            target = re.search(r'Target="\.\./embeddings/([^"]+)"', rels).group(1)
            assert package.read(f"ppt/embeddings/{target}") == storage  # the source's storage, byte for byte
            assert 'progId="Package"' in package.read(f"ppt/slideLayouts/{layout}").decode()
    assert converted.fidelity["counts"]["embedded_objects"] == {"source": 2, "result": 2}
    assert converted.fidelity["complete"] is True, converted.fidelity["lost"]
    deck = pptx.Presentation(str(converted.path))
    assert sum(shape.shape_type == 7 and shape.ole_format.prog_id == "Package" for layout in deck.slide_layouts
               for shape in layout.shapes) == len({used[0], used[2]})


def edited(package, target, part, edit):
    """A copy of the OOXML ``package`` at ``target`` whose ``part`` is ``edit(its bytes)``."""
    with zipfile.ZipFile(package) as src, zipfile.ZipFile(target, "w") as out:
        for info in src.infolist():
            data = src.read(info)
            out.writestr(info, edit(data) if info.filename == part else data)
    return target


def _record(kind, body, version_and_instance=0):
    return struct.pack("<HHI", version_and_instance, kind, len(body)) + body


def package_storage(name, data):
    """The storage Office's Object Packager makes of a file: a CompObj naming "Package" and the Ole10Native stream
    (its size, then the label, the file's path, a temp path's length and itself, the data's length and the data)."""
    comp = (struct.pack("<II", 0xFFFE0001, 0x00000A03) + b"\xff" * 4 + PACKAGE_CLSID
            + struct.pack("<I", 8) + b"Package\0" + struct.pack("<I", 0) + struct.pack("<I", 8) + b"Package\0")
    path = f"C:\\{name}".encode() + b"\0"
    body = (struct.pack("<H", 2) + name.encode() + b"\0" + path + struct.pack("<II", 0x00030000, len(path)) + path
            + struct.pack("<I", len(data)) + data)
    return cfb.write(cfb.Entry("Root Entry", clsid=PACKAGE_CLSID, children=[
        cfb.Entry("\x01CompObj", data=comp), cfb.Entry("\x01Ole10Native", data=struct.pack("<I", len(body)) + body)]))


@pytest.fixture(scope="module")
def packaged(three_objects, tmp_path_factory):
    """(the deck with slide 1's object a packaged text file, that object's storage, a plain soffice's .pptx of it)."""
    target = tmp_path_factory.mktemp("packaged") / "packaged.ppt"
    storage = package_storage("notes.txt", PACKAGED)
    legacy = objects._source_objects(three_objects)
    with_storage(three_objects, legacy.slides[0][0].object_ref, storage, target)
    return target, storage, soffice(target, "pptx", target.parent / "plain")


def with_storage(deck, ref, storage, target):
    """``deck`` with object ``ref``'s storage replaced by ``storage``, as an incremental save of PowerPoint writes
    it (a new ExOleObjStg record, persist directory and UserEditAtom after the others), written to ``target``."""
    with olefile.OleFileIO(str(deck)) as ole:
        streams = {"/".join(name): ole.openstream(name).read() for name in ole.listdir()}
    current, document = bytearray(streams["Current User"]), bytearray(streams["PowerPoint Document"])
    edit_at = struct.unpack_from("<I", current, 16)[0]
    directory, _edits, _session = decrypt._persist_directory(document, edit_at)
    directory[objects._source_objects(deck).objects[ref].persist] = len(document)
    document += _record(ppt.RT_EXOLEOBJ_STG, struct.pack("<I", len(storage)) + zlib.compress(storage), 0x10)
    directory_at = len(document)
    document += _record(0x1772, b"".join(struct.pack("<II", persist | 1 << 20, offset)
                                         for persist, offset in sorted(directory.items())))
    edit = bytearray(document[edit_at + 8:edit_at + 8 + 0x1C])
    struct.pack_into("<II", edit, 8, 0, directory_at)  # no earlier edit: the whole directory is in the new one
    struct.pack_into("<I", current, 16, len(document))
    document += _record(0x0FF5, bytes(edit))
    streams.update({"Current User": bytes(current), "PowerPoint Document": bytes(document)})
    target.write_bytes(cfb.write(cfb.Entry("Root Entry", children=[
        cfb.Entry(name, data=data) for name, data in streams.items() if "/" not in name])))
    return target


def test_a_packaged_file_that_libreoffice_made_a_picture_is_an_object_again(packaged, office, tmp_path):
    path, storage, plain = packaged
    assert inventory.of_source(path, "ppt").counts["embedded_objects"] == SLIDES
    # what LibreOffice itself writes: slide 1 holds a picture, no object (its ODF export holds none either)
    assert [n for n, _, _, _ in slide_objects(plain)] == [2, 3]

    converted = convert.convert(office, path, "ppt", tmp_path / "work", 60)
    found = slide_objects(converted.path)
    assert [n for n, _, _, _ in found] == [1, 2, 3]
    assert len({part for _, part, _, _ in found}) == SLIDES
    assert (found[0][2], found[0][3]) == (storage, "Package")  # the source's storage, byte for byte
    with olefile.OleFileIO(found[0][2]) as ole:
        assert PACKAGED in ole.openstream("\x01Ole10Native").read()
    with zipfile.ZipFile(converted.path) as package:
        types = package.read("[Content_Types].xml").decode()
        assert f'PartName="/{found[0][1]}" ContentType="{OLE_CONTENT_TYPE}"' in types
        slide = package.read("ppt/slides/slide1.xml").decode()
        assert re.search(r"<p:oleObj [^>]*><p:embed/><p:pic>.*<a:blip r:embed=", slide)  # the picture replaces it
        assert re.search(r'<p:oleObj spid="" ', slide)  # as LibreOffice writes its own objects
        ids = re.findall(r'<p:cNvPr id="(\d+)"', slide)
        assert len(ids) == len(set(ids))
    assert converted.fidelity["counts"]["embedded_objects"] == {"source": SLIDES, "result": SLIDES}
    assert converted.fidelity["complete"] is True, converted.fidelity["lost"]
    deck = pptx.Presentation(str(converted.path))
    assert [shape.ole_format.prog_id for shape in deck.slides[0].shapes if shape.shape_type == 7] == ["Package"]
    reloaded = soffice(converted.path, "odp", tmp_path / "reload")
    with zipfile.ZipFile(reloaded) as odp:
        assert odp.read("content.xml").count(b"<draw:page ") == SLIDES


def test_a_picture_away_from_the_object_s_anchor_stays_a_picture(packaged, tmp_path):
    """Which picture stands for the object is told by its place only: one elsewhere is left as it is."""
    path, _storage, exported = packaged
    plain = Path(shutil.copy(exported, tmp_path / "plain.pptx"))
    def move(data):
        data, count = re.subn(rb'<a:off x="([1-9]\d*)"', lambda m: b'<a:off x="%d"' % (int(m[1]) + 50800), data)
        assert count == 1
        return data

    moved = edited(plain, tmp_path / "moved.pptx", "ppt/slides/slide1.xml", move)
    # the same pass gives the objects of slides 2 and 3 their own parts; slide 1's picture stays one
    assert objects.mend(moved, path, "ppt", SLIDES) == 2
    assert [n for n, _, _, _ in slide_objects(moved)] == [2, 3]
    assert objects.mend(plain, path, "ppt", SLIDES) == SLIDES  # where LibreOffice put it, it is found
    assert [n for n, _, _, _ in slide_objects(plain)] == [1, 2, 3]


def _inline(n):
    return (f'<text:p>before {n} <draw:frame draw:name="Sheet{n}" text:anchor-type="as-char" svg:width="6cm" '
            'svg:height="2cm"><draw:object><office:document office:version="1.2" '
            'office:mimetype="application/vnd.oasis.opendocument.spreadsheet"><office:body><office:spreadsheet>'
            f'<table:table table:name="Inner{n}"><table:table-row><table:table-cell office:value-type="string">'
            f'<text:p>object {n}</text:p></table:table-cell></table:table-row></table:table></office:spreadsheet>'
            f'</office:body></office:document></draw:object></draw:frame> after {n}</text:p>')


def _doc_with_packaged_object(out, name, with_comp_obj):
    """(a .doc whose first of two embedded workbooks is a packaged text file, stored as the Packager does, with or
    without its CompObj; that object's storage's streams, a plain soffice's .docx of it)."""
    (out / "two.fodt").write_text(flat_odf("text", _inline(1) + _inline(2)))
    made = soffice(out / "two.fodt", "doc:MS Word 97", out, "OpenDocument Text Flat XML")
    with olefile.OleFileIO(str(made)) as ole:
        root = cfb.read_storage(ole, "", 1 << 24)
    with olefile.OleFileIO(package_storage("notes.txt", PACKAGED)) as ole:
        native, comp = ole.openstream("\x01Ole10Native").read(), ole.openstream("\x01CompObj").read()
    pool = next(child for child in root.children if child.name == "ObjectPool")
    # the object of the first EMBED field in the text: LibreOffice numbers them down from 2**31 - 2
    first = max(pool.children, key=lambda child: child.name)
    first.clsid = PACKAGE_CLSID
    first.children = [cfb.Entry("\x01CompObj", data=comp)] * with_comp_obj + [
        cfb.Entry("\x01Ole10Native", data=native), cfb.Entry("\x03ObjInfo", data=bytes.fromhex("000003000d00"))]
    target = out / name
    target.write_bytes(cfb.write(root))
    return target, first.streams(), soffice(target, "docx", out / "plain")


@pytest.fixture(scope="module")
def packaged_doc(tmp_path_factory):
    """(a .doc whose first of two embedded workbooks is a packaged text file with no CompObj, a plain soffice's
    .docx of it)."""
    target, _, plain = _doc_with_packaged_object(tmp_path_factory.mktemp("packaged-doc"), "packaged.doc", False)
    return target, plain


def text_objects(path):
    """[(ProgID, the embedded part's bytes)] of each o:OLEObject of the .docx, in the order of its text."""
    with zipfile.ZipFile(path) as package:
        document = package.read("word/document.xml").decode()
        rels = package.read("word/_rels/document.xml.rels").decode()
        found = []
        for tag in re.findall(r"<o:OLEObject [^>]*>", document):
            rid = re.search(r'r:id="([^"]+)"', tag).group(1)
            target = re.search(rf'<Relationship [^>]*Id="{rid}"[^>]*Target="([^"]+)"', rels).group(1)
            found.append((re.search(r'ProgID="([^"]*)"', tag).group(1), package.read(f"word/{target}")))
    return found


def test_a_packaged_file_in_a_text_that_libreoffice_made_a_picture_is_an_object_again(packaged_doc, office, tmp_path):
    packaged_doc, plain = packaged_doc
    assert inventory.of_source(packaged_doc, "doc").counts["embedded_objects"] == 2
    # what LibreOffice itself writes: one object
    assert [prog_id for prog_id, _ in text_objects(plain)] == ["Excel.Sheet.12"]

    converted = convert.convert(office, packaged_doc, "doc", tmp_path / "work", 60)
    found = text_objects(converted.path)
    assert [prog_id for prog_id, _ in found] == ["Package", "Excel.Sheet.12"]  # in the text's order
    with olefile.OleFileIO(found[0][1]) as ole:
        assert PACKAGED in ole.openstream("\x01Ole10Native").read()
        assert ole.root.clsid == str(uuid.UUID(bytes_le=PACKAGE_CLSID)).upper()
    with zipfile.ZipFile(converted.path) as package:
        document = package.read("word/document.xml").decode()
        assert "<w:drawing>" not in document  # the picture became the object's image
        assert re.search(r'<w:object [^>]*><v:shape [^>]*><v:imagedata r:id="rId\d+"', document)
        assert OLE_CONTENT_TYPE in package.read("[Content_Types].xml").decode()
    assert converted.fidelity["counts"]["embedded_objects"] == {"source": 2, "result": 2}
    assert converted.fidelity["complete"] is True, converted.fidelity["lost"]
    assert "before 1" in docx.Document(str(converted.path)).paragraphs[0].text
    reloaded = soffice(converted.path, "odt", tmp_path / "reload")
    with zipfile.ZipFile(reloaded) as odt:
        assert b"after 2" in odt.read("content.xml")


def test_a_text_whose_pictures_do_not_pair_with_its_objects_is_left_as_it_is(packaged_doc, tmp_path):
    """Which picture is which object is told by their order in the text only: a result with one inline picture
    more than the source is not edited."""
    packaged_doc, exported = packaged_doc
    plain = Path(shutil.copy(exported, tmp_path / "plain.docx"))
    def twice(data):
        drawing = re.search(rb"<w:r><w:rPr></w:rPr><w:drawing>.*?</w:drawing></w:r>", data).group(0)
        return data.replace(drawing, drawing + drawing, 1)

    extra = edited(plain, tmp_path / "extra.docx", "word/document.xml", twice)
    before = extra.read_bytes()
    assert word_objects.mend(extra, packaged_doc, "doc", 2) == 0
    assert extra.read_bytes() == before
    assert word_objects.mend(plain, packaged_doc, "doc", 2) == 1


def test_an_object_that_libreoffice_keeps_unnamed_gets_its_progid_and_its_own_storage(office, tmp_path):
    """With its CompObj, LibreOffice keeps the packaged file as an object, but writes ``ProgID=""`` and adds empty
    streams of its own to the storage: Word would not know the object's server from the .docx."""
    source, streams, plain = _doc_with_packaged_object(tmp_path, "named.doc", True)
    assert [prog_id for prog_id, _ in text_objects(plain)] == ["", "Excel.Sheet.12"]
    with olefile.OleFileIO(text_objects(plain)[0][1]) as ole:
        assert ["/".join(name) for name in ole.listdir()] != list(streams)  # LibreOffice's rewrite

    converted = convert.convert(office, source, "doc", tmp_path / "work", 60)
    found = text_objects(converted.path)
    assert [prog_id for prog_id, _ in found] == ["Package", "Excel.Sheet.12"]
    with olefile.OleFileIO(found[0][1]) as ole:  # the ObjectPool's storage, stream for stream
        assert {"/".join(name): ole.openstream(name).read() for name in ole.listdir()} == streams
        assert ole.root.clsid == str(uuid.UUID(bytes_le=PACKAGE_CLSID)).upper()
    assert converted.fidelity["complete"] is True, converted.fidelity["lost"]
    assert "before 1" in docx.Document(str(converted.path)).paragraphs[0].text
    reloaded = soffice(converted.path, "odt", tmp_path / "reload")
    with zipfile.ZipFile(reloaded) as odt:
        assert b"after 2" in odt.read("content.xml")


def test_an_unnamed_object_whose_storage_the_source_does_not_hold_keeps_libreoffice_s(tmp_path):
    """Which storage of the legacy file an unnamed object is, is told by its streams only: one that no storage of
    the source matches gets its ProgID and keeps the storage LibreOffice wrote."""
    source, _, exported = _doc_with_packaged_object(tmp_path, "named.doc", True)
    def other(data):
        with olefile.OleFileIO(data) as ole:
            root = cfb.read_storage(ole, "", 1 << 24)
        native = next(child for child in root.children if child.name == "\x01Ole10Native")
        native.data = native.data.replace(PACKAGED, PACKAGED.upper())
        return cfb.write(root)

    target = text_objects(exported)[0]
    with zipfile.ZipFile(exported) as package:
        part = next(name for name in package.namelist() if package.read(name) == target[1])
    changed = edited(exported, tmp_path / "changed.docx", part, other)
    assert word_objects.mend(changed, source, "doc", 2) == 1
    (prog_id, data), _ = text_objects(changed)
    assert prog_id == "Package"
    assert data == other(target[1])  # LibreOffice's storage, not the source's


def note_objects(path):
    """[(ProgID, the embedded part's name or None)] of each o:OLEObject of the .docx's footnotes, its r:id looked
    up where OPC says: in the footnotes part's own relationships."""
    with zipfile.ZipFile(path) as package:
        notes = package.read("word/footnotes.xml").decode()
        names = package.namelist()
        rels = package.read("word/_rels/footnotes.xml.rels").decode() if "word/_rels/footnotes.xml.rels" in names \
            else ""
    found = []
    for tag in re.findall(r"<o:OLEObject [^>]*>", notes):
        rid = re.search(r'r:id="([^"]+)"', tag).group(1)
        target = re.search(rf'<Relationship [^>]*Id="{rid}"[^>]*Target="([^"]+)"', rels)
        found.append((re.search(r'ProgID="([^"]*)"', tag).group(1), target and f"word/{target.group(1)}"))
    return found


def test_an_object_in_a_footnote_is_related_from_the_footnotes(office, tmp_path):
    """LibreOffice writes a footnote's object's relationship in the main document's part: its own .docx, opened
    again, shows the footnote's picture and no object. docshift's keeps the object there."""
    obj = _inline(1).replace("<text:p>before 1 ", "").replace(" after 1</text:p>", "")
    (tmp_path / "note.fodt").write_text(flat_odf("text", (
        '<text:p>main text<text:note text:id="n1" text:note-class="footnote"><text:note-citation>1'
        f'</text:note-citation><text:note-body><text:p>note {obj} end</text:p></text:note-body></text:note>'
        ' more</text:p>')))
    source = soffice(tmp_path / "note.fodt", "doc:MS Word 97", tmp_path, "OpenDocument Text Flat XML")
    plain = soffice(source, "docx", tmp_path / "plain")
    assert note_objects(plain) == [("Excel.Sheet.12", None)]  # LibreOffice's: the r:id names nothing

    converted = convert.convert(office, source, "doc", tmp_path / "work", 60)
    [(prog_id, part)] = note_objects(converted.path)
    assert prog_id == "Excel.Sheet.12" and part.startswith("word/embeddings/")
    with zipfile.ZipFile(converted.path) as package, zipfile.ZipFile(io.BytesIO(package.read(part))) as book:
        assert b"object 1" in book.read("xl/sharedStrings.xml")  # the workbook itself
    assert converted.fidelity["complete"] is True, converted.fidelity["lost"]
    assert "main text" in docx.Document(str(converted.path)).paragraphs[0].text
    for result, kept in ((converted.path, True), (plain, False)):
        reloaded = soffice(result, "odt", tmp_path / ("reload" if kept else "reload-plain"))
        with zipfile.ZipFile(reloaded) as odt:
            note = re.search(rb"<text:note-body>.*?</text:note-body>", odt.read("content.xml"), re.S).group(0)
        assert (b"<draw:object " in note) is kept


def test_an_object_whose_storage_does_not_inflate_counts_as_its_picture(office, tmp_path):
    """Two objects of a real deck (POI's bug60345_suba.ppt) hold a zlib stream that breaks off: PowerPoint opens
    neither and shows their replacement pictures, which LibreOffice keeps as pictures. They count as pictures on
    both sides, and the eight whole objects as objects (before, the report named two objects lost)."""
    deck = ROOT.parent / "shared" / "corpus" / "ppt" / "bug60345_suba.ppt"
    source = inventory.of_source(deck, "ppt")
    assert (source.counts["embedded_objects"], source.counts["images"]) == (8, 2)
    converted = convert.convert(office, deck, "ppt", tmp_path / "work", 60)
    assert converted.fidelity["counts"]["embedded_objects"] == {"source": 8, "result": 8}
    assert converted.fidelity["counts"]["images"] == {"source": 2, "result": 2}
    assert converted.fidelity["complete"] is True, converted.fidelity["lost"]



def test_a_doc_that_is_no_compound_file_is_left_quietly(tmp_path, caplog):
    """LibreOffice converts RTF, HTML and Word 2003 XML under a .doc name: the objects' mends have no storages to
    read there, which is no fault, and they say nothing (each such file logged a warning)."""
    made = tmp_path / "made.docx"
    docx.Document().save(str(made))
    named = tmp_path / "named.doc"
    named.write_text(r"{\rtf1\ansi {\object\objemb {\*\objclass Excel.Sheet.8}}}")
    with caplog.at_level("WARNING", logger="docshift.engine"):
        assert word_objects.mend(made, named, "doc", None) == 0
    assert caplog.records == []
