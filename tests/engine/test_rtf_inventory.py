"""An RTF file named .doc: the fidelity report counts its pictures, embedded objects and comments, where it knew
none of them before (every count was null, so nothing it lost could be named); and one whose fields' results
LibreOffice computes otherwise as it exports converts, where the text check refused it.

Made here: RTF written as Word writes it (a picture with its rendering for older readers, a shape's picture with
its result, an object with its preview, a list's picture bullet, a comment, a header's picture), its object's
data the storage of an object in a corpus .doc.
"""

import binascii
import io
import struct
import tracemalloc
import zipfile

import docx
import pytest
from conftest import ROOT

from docshift.engine import cfb, convert, inventory
from docshift.engine.cfb import CompoundFile
from docshift.engine.inventory import rtf

CORPUS = ROOT.parent / "shared" / "corpus"
PNG_HEADER = b"\x89PNG\r\n\x1a\n"


def _png(colour, note=b""):
    """A 2 x 2 PNG of one ``colour`` (RGB), written here; a ``note`` (a tEXt chunk) changes its bytes, not its
    pixels."""
    import zlib

    def chunk(kind, body):
        return struct.pack(">I", len(body)) + kind + body + struct.pack(">I", zlib.crc32(kind + body))

    rows = b"".join(b"\0" + bytes(colour) * 2 for _ in range(2))
    text = chunk(b"tEXt", b"Comment\0" + note) if note else b""
    return PNG_HEADER + chunk(b"IHDR", struct.pack(">IIBBBBB", 2, 2, 8, 2, 0, 0, 0)) + text + \
        chunk(b"IDAT", zlib.compress(rows)) + chunk(b"IEND", b"")


def _hex(data):
    text = binascii.hexlify(data).decode()
    return "\n".join(text[at:at + 64] for at in range(0, len(text), 64))


def _pict(data, words=r"\pngblip\picw2\pich2\picwgoal600\pichgoal600"):
    return r"{\pict" + words + "\n" + _hex(data) + "}"


def _object_data():
    """An embedded object's ``\\objdata``: the OLE 1 header Word writes, then the object's storage (a Word document
    of ``53379.doc``'s ObjectPool) as a compound file."""
    with CompoundFile(CORPUS / "doc" / "53379.doc") as ole:
        pool = cfb.read_storage(ole, "ObjectPool", 1 << 26)
    storage = next(kid for kid in pool.children if kid.data is None and kid.name == "_1099465951")
    native = cfb.write(cfb.Entry("Root Entry", clsid=storage.clsid, children=storage.children))
    name = b"Word.Document.8\0"
    return struct.pack("<II", 0x501, 2) + struct.pack("<I", len(name)) + name + bytes(8) + \
        struct.pack("<I", len(native)) + native


def word_like(with_object=True):
    """RTF as Word writes it. It shows 5 pictures (red twice, the second time in other bytes, which LibreOffice
    keeps as one media part; the header's blue, a shape's green, a yellow one of binary data), 1 embedded object and
    1 comment; the rest is renderings and bullets no page shows."""
    red, blue, green, yellow = (_png(colour) for colour in ((200, 0, 0), (0, 0, 200), (0, 150, 0), (250, 220, 0)))
    grey = _png((90, 90, 90))
    obj = (r"\pard An object {\object\objemb\objw1440\objh1440{\*\objclass Word.Document.8}{\*\objdata" + "\n"
           + _hex(_object_data()) + r"}{\result{\*\shppict" + _pict(grey) + r"}}}\par" + "\n") if with_object else ""
    return "".join([
        r"{\rtf1\ansi\ansicpg1252\deff0{\fonttbl{\f0\froman Times New Roman;}}" "\n",
        r"{\*\listtable{\list\listtemplateid1{\listlevel\levelnfc23\levelpicture0{\leveltext\'01\'b7;}"
        r"{\levelnumbers;}}\listid1}}" "\n",
        r"{\*\listpicture{\*\shppict" + _pict(grey) + "}}\n",
        r"{\header\pard\plain Header {\*\shppict" + _pict(blue) + r"}\par}" "\n",
        r"\pard\plain Body {\*\shppict" + _pict(red, r"{\*\picprop{\sp{\sn wzDescription}{\sv red}}}\pngblip") + "}",
        r"{\nonshppict" + _pict(grey, r"\wmetafile8\picw2\pich2") + r"}\par" "\n",
        r"\pard Again {\*\shppict" + _pict(_png((200, 0, 0), b"again")) + r"}\par" "\n",
        r"{\shp{\*\shpinst\shpleft0\shptop0\shpright600\shpbottom600{\sp{\sn shapeType}{\sv 75}}"
        r"{\sp{\sn pib}{\sv " + _pict(green) + r"}}}{\shprslt " + _pict(grey) + "}}\n",
        r"\pard Binary {\*\shppict{\pict\pngblip\picw2\pich2\bin" + str(len(yellow)) + " ",
    ]).encode("latin-1") + yellow + "".join([
        "}}\\par\n",
        r"\pard A word{\*\atnid JD}{\*\atnauthor John Doe}\chatn{\*\annotation\pard\plain The comment\par}\par" "\n",
        obj,
        "}",
    ]).encode("latin-1")


def test_an_rtf_source_counts_the_pictures_objects_and_comments_it_shows(tmp_path):
    source = tmp_path / "word-like.doc"
    source.write_bytes(word_like())
    assert rtf.is_rtf(source)
    counts = inventory.of_source(source, "doc").counts
    assert {what: counts[what] for what in ("images", "embedded_objects", "comments")} == \
        {"images": 5, "embedded_objects": 1, "comments": 1}
    # the text and the headers in effect are not read: unknown, never a loss
    assert counts["characters"] is None and counts["headers_footers"] is None


def test_binary_picture_data_may_hold_braces(tmp_path):
    """``\\bin`` data is stepped over by its length: braces in it open and close no group."""
    data = b"{\x89}}{{\x00"
    source = tmp_path / "braces.doc"
    source.write_bytes(b"{\\rtf1 {\r\n\\pict\\pngblip\\bin" + str(len(data)).encode() + b" " + data +
                       b"}{\\*\\annotation x}}")
    counts = inventory.of_source(source, "doc").counts
    assert (counts["images"], counts["comments"]) == (1, 1)


def test_a_picture_counts_where_it_shows_and_a_header_s_once(tmp_path):
    """Twice in the text is two pictures, as the result places two; one picture in two headers (the default and
    the first page's) is one, as LibreOffice may write one header in several parts."""
    source = tmp_path / "placed.doc"
    source.write_bytes(b"{\\rtf1{\\header{\\pict\\pngblip 0a0b}}{\\headerf{\\pict\\pngblip 0A 0B}}"
                       b"{\\footer{\\pict\\pngblip 0c}}{\\pict\\pngblip 0a0b}\\par{\\pict\\pngblip 0a0b}}")
    assert inventory.of_source(source, "doc").counts["images"] == 2 + 2


def test_groups_nested_past_any_document_s_stay_unknown_and_cost_little(tmp_path):
    """4 MB of "{" held 480 MB of the worker's memory for 3 s; past the bound the counts are unknown at once."""
    source = tmp_path / "braces.doc"
    source.write_bytes(b"{\\rtf1" + b"{" * (4 << 20))
    tracemalloc.start()
    try:
        counts = inventory.of_source(source, "doc").counts
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert counts["images"] is None and counts["comments"] is None
    assert peak < 32 << 20


def test_a_file_that_is_no_rtf_stays_unknown(tmp_path):
    source = tmp_path / "plain.doc"
    source.write_bytes(b"{\\rtx1 not quite}")
    assert inventory.of_source(source, "doc").counts["images"] is None


@pytest.mark.parametrize("with_object", [True, False])
def test_an_rtf_named_doc_converts_with_its_counts_and_a_complete_report(office, tmp_path, with_object):
    source = tmp_path / "word-like.doc"
    source.write_bytes(word_like(with_object))
    converted = convert.convert(office, source, "doc", tmp_path, 60)
    assert converted.detected_format == "rtf"
    counts = converted.fidelity["counts"]
    assert counts["images"] == {"source": 5, "result": 5}  # 4 media parts: the two reds are one
    assert counts["embedded_objects"] == {"source": int(with_object), "result": int(with_object)}
    assert counts["comments"] == {"source": 1, "result": 1}
    assert converted.fidelity["complete"], converted.fidelity["lost"]
    # and a result that lost the comment and the object is named so
    with zipfile.ZipFile(converted.path) as package:
        parts = {name: package.read(name) for name in package.namelist()}
    kept = {name: data for name, data in parts.items()
            if name != "word/comments.xml" and not name.startswith("word/embeddings/")}
    damaged = io.BytesIO()
    with zipfile.ZipFile(damaged, "w") as package:
        for name, data in kept.items():
            package.writestr(name, data)
    (tmp_path / "lost.docx").write_bytes(damaged.getvalue())
    report = inventory.report(inventory.of_source(source, "doc"), inventory.of_result(tmp_path / "lost.docx", "doc"))
    lost = {entry["what"]: entry["detail"] for entry in report["lost"]}
    assert lost["comments"] == "1 of 1 comments is missing"
    assert ("embedded_objects" in lost) is with_object


def test_an_rtf_whose_fields_libreoffice_computes_otherwise_converts(office, tmp_path):
    """Word's stored results of references to missing bookmarks ("Error! No bookmark name given.") and of a
    character count: LibreOffice loads them as they are and writes its own ("Error: Reference source not found",
    its count). Three real RTF files of 147 (AbiWord's, latex2rtf's, rtf2xml's field tests) failed
    ``output_invalid`` so; the text outside the fields must still all be there."""
    lines = [r"{\rtf1\ansi\deff0{\fonttbl{\f0 Times New Roman;}}", r"\pard Before the fields, a letter.\par"]
    lines += [r"\pard Text:{\field{\*\fldinst { REF missing" + str(n) + r" \\* Upper }}"
              r"{\fldrslt {Error! No bookmark name given.}}} (ref):text\par" for n in range(6)]
    lines += [r"\pard Characters: {\field{\*\fldinst NUMCHARS}{\fldrslt 2414}}\par", r"\pard After them.\par}"]
    source = tmp_path / "fields.doc"
    source.write_text("\n".join(lines))
    converted = convert.convert(office, source, "doc", tmp_path, 60)
    text = "".join(paragraph.text for paragraph in docx.Document(converted.path).paragraphs)
    assert "Before the fields, a letter." in text and "After them." in text and text.count("(ref):text") == 6
