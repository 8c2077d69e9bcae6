"""Legacy files LibreOffice loses part of as they are, converted from a mended copy (``mended.copy``):
a deck whose chain of saves is broken (``ppt_edits``), a workbook whose notes have boxes of no height
(``xls_notes``), both real files of the corpus, and a text whose continuous section has headers of its own
(``doc_sections``), made here. A plain ``soffice`` shows what LibreOffice made of each before.
"""

import random
import re
import struct
import threading
import zipfile

import olefile
import pytest
from conftest import ROOT
from conftest import _soffice_save as soffice

from docshift.engine import convert, doc_sections, inventory, mended, xls_notes
from docshift.engine.inventory import doc as word

CORPUS = ROOT.parent / "shared" / "corpus"


def test_a_deck_whose_chain_of_saves_is_broken_keeps_its_text_and_picture(office, tmp_path):
    """POI's 57272 deck: the UserEditAtom of its third save names itself as the save before. LibreOffice reads the
    deck as six slides without a word or a picture (a plain soffice's result); relinked, it reads all of them."""
    deck = CORPUS / "ppt" / "57272_corrupted_usereditatom.ppt"
    before = deck.read_bytes()
    source = inventory.of_source(deck, "ppt")
    assert source.broken_chain and (source.counts["slides"], source.counts["characters"]) == (6, 362)
    plain = inventory.of_result(soffice(deck, "pptx", tmp_path / "plain"), "ppt")
    assert (plain.counts["slides"], plain.counts["characters"], plain.counts["images"]) == (6, 0, 0)
    converted = convert.convert(office, deck, "ppt", tmp_path / "work", 60)
    assert converted.fidelity["counts"]["characters"] == {"source": 362, "result": 362}
    assert converted.fidelity["counts"]["images"] == {"source": 1, "result": 1}
    assert converted.fidelity["complete"] is True, converted.fidelity["lost"]
    # the customer's file is as it was, and the copy LibreOffice read has a whole chain
    assert deck.read_bytes() == before
    assert not inventory.of_source(tmp_path / "work" / "relinked.ppt", "ppt").broken_chain


def test_notes_whose_boxes_have_no_height_are_kept(office, tmp_path):
    """POI's 36947 workbook: three of its 129 notes have a box whose bottom edge is on or above its top one.
    LibreOffice drops them (a plain soffice's result has 126); a copy whose three boxes have a height keeps all."""
    book = CORPUS / "xls" / "36947.xls"
    before = book.read_bytes()
    source = inventory.of_source(book, "xls")
    assert source.counts["comments"] == 129 and len(source.unsized_notes) == 3
    plain = inventory.of_result(soffice(book, "xlsx", tmp_path / "plain"), "xls")
    assert plain.counts["comments"] == 126
    converted = convert.convert(office, book, "xls", tmp_path / "work", 60)
    assert converted.fidelity["counts"]["comments"] == {"source": 129, "result": 129}
    assert converted.fidelity["complete"] is True, converted.fidelity["lost"]
    assert book.read_bytes() == before
    sized = tmp_path / "work" / "sized.xls"
    assert inventory.of_source(sized, "xls").unsized_notes == []
    with olefile.OleFileIO(str(sized)) as ole:  # nothing else of the workbook changed: 3 x 4 bytes of anchors
        changed = ole.openstream("Workbook").read()
    with olefile.OleFileIO(str(book)) as ole:
        original = ole.openstream("Workbook").read()
    assert len(changed) == len(original) and sum(a != b for a, b in zip(changed, original, strict=True)) <= 12


def test_a_mended_copy_that_does_not_convert_leaves_the_first_result(office, tmp_path, monkeypatch):
    """Should the mended copy not convert, the result of the file as it is stands, its report naming the loss."""
    def broken(source, anchors):  # a Workbook stream of random bytes: no workbook at all
        with olefile.OleFileIO(str(source)) as ole:
            size = ole.get_size("Workbook")
        return {"Workbook": random.Random(7).randbytes(size)}

    monkeypatch.setattr(xls_notes, "sized", broken)
    converted = convert.convert(office, CORPUS / "xls" / "36947.xls", "xls", tmp_path / "work", 60)
    assert converted.fidelity["counts"]["comments"] == {"source": 129, "result": 126}
    assert converted.fidelity["complete"] is False
    assert converted.path.parent.parent.name == "load-1"  # the first export's file


def test_a_note_whose_box_has_no_width_is_kept(office, tmp_path):
    """The corpus's SimpleWithComments.xls with its first note's box made zero columns wide (its right edge set to
    its left one): LibreOffice drops that note as it is; from the mended copy the result holds all three."""
    data = bytearray(olefile.OleFileIO(str(CORPUS / "xls" / "SimpleWithComments.xls")).openstream("Workbook").read())
    at = data.index(xls_notes.ANCHOR_RECORD) + len(xls_notes.ANCHOR_RECORD)
    data[at + 10:at + 14] = data[at + 2:at + 6]  # (colR, dxR) = (colL, dxL)
    book = tmp_path / "narrow.xls"
    book.write_bytes((CORPUS / "xls" / "SimpleWithComments.xls").read_bytes())
    with olefile.OleFileIO(str(book), write_mode=True) as ole:
        ole.write_stream("Workbook", bytes(data))
    source = inventory.of_source(book, "xls")
    assert source.counts["comments"] == 3 and len(source.unsized_notes) == 1
    assert inventory.of_result(soffice(book, "xlsx", tmp_path / "plain"), "xls").counts["comments"] == 2
    converted = convert.convert(office, book, "xls", tmp_path / "work", 60)
    assert converted.fidelity["counts"]["comments"] == {"source": 3, "result": 3}
    assert converted.fidelity["complete"] is True, converted.fidelity["lost"]


def test_a_reading_of_the_records_that_never_ends_leaves_the_counts_unknown(office, tmp_path, monkeypatch, caplog):
    """The legacy file's records are counted on a thread beside LibreOffice. Should that reading never end (a
    third-party reader going round for ever, as xlrd's once did), the conversion finishes once the reading has run
    ``INVENTORY_SECONDS``: the result is checked and returned, the source's counts unknown (so nothing is named
    lost) and a warning says so; the task is never held by it."""
    release = threading.Event()

    def never_ends(*_args):
        release.wait(30)
        raise RuntimeError("released")
    monkeypatch.setattr(inventory, "of_source", never_ends)
    monkeypatch.setattr(convert, "INVENTORY_SECONDS", 1)
    try:
        converted = convert.convert(office, CORPUS / "xls" / "36947.xls", "xls", tmp_path / "work", 60)
    finally:
        release.set()
    assert converted.path.is_file() and converted.extension == "xlsx"
    counts = converted.fidelity["counts"]
    assert all(count["source"] is None for count in counts.values()), counts
    assert counts["comments"]["result"] == 126  # the result was still counted: no mended copy without the records
    assert converted.fidelity["complete"] is True
    assert "still being read" in caplog.text


@pytest.fixture(scope="module")
def continuous(tmp_path_factory):
    """A .doc of two sections, the second continuous, with a running header and a footer of its own that show on
    the pages that begin in it (it runs longer than a page), and none in the first section. LibreOffice writes no
    continuous section with headers, so its .doc of two "new page" sections gets, in the second section's SEPX, a
    break code of "continuous" (``sprmSBkc`` 0) in place of the "no restart of page numbers" (``sprmSFPgnRestart``
    0) it wrote: the same three bytes long."""
    import docx
    from docx.enum.section import WD_SECTION

    out = tmp_path_factory.mktemp("continuous")
    document = docx.Document()
    document.add_paragraph("The title page of the guide")
    section = document.add_section(WD_SECTION.NEW_PAGE)
    for story, text in ((section.header, "Running title of the guide"), (section.footer, "Confidential footer")):
        story.is_linked_to_previous = False
        story.paragraphs[0].text = text
    for number in range(40):  # more than a page's worth: a page begins inside the section
        document.add_paragraph(f"Paragraph {number} of the guide's body, which runs on to a second page.")
    document.save(out / "guide.docx")
    path = soffice(out / "guide.docx", "doc:MS Word 97", out)
    with olefile.OleFileIO(str(path), write_mode=True) as ole:
        data = bytearray(ole.openstream("WordDocument").read())
        table = ole.openstream("1Table").read()
        fib = word._fib(bytes(data), lambda name: table)
        at, count = fib.pair(word.PAIR_PLCF_SED)[0], 2
        sepx = struct.unpack_from("<I", table, at + 4 * (count + 1) + 12 + 2)[0]
        size = struct.unpack_from("<H", data, sepx)[0]
        grpprl = sepx + 2 + data[sepx + 2:sepx + 2 + size].index(b"\x0e\x30\x00")
        data[grpprl:grpprl + 3] = struct.pack("<HB", word.SPRM_BREAK_CODE, word.BREAK_CONTINUOUS)
        ole.write_stream("WordDocument", bytes(data))
    return path


def _sections(result):
    with zipfile.ZipFile(result) as package:
        xml = package.read("word/document.xml").decode()
        return [(re.search(r'<w:type w:val="(\w+)"', sec).group(1), "w:headerReference" in sec,
                 "w:footerReference" in sec) for sec in re.findall(r"<w:sectPr>.*?</w:sectPr>", xml)]


def test_a_continuous_section_keeps_its_own_headers_and_footers(office, continuous, tmp_path):
    """LibreOffice's import drops the headers and footers of a continuous section (a plain soffice's .docx has
    none). From the mended copy the .docx has both, in the second section, which starts continuous again."""
    source = inventory.of_source(continuous, "doc")
    assert (source.sections, set(source.continuous_headers), source.counts["headers_footers"]) == (2, {1}, 2)
    plain = soffice(continuous, "docx", tmp_path / "plain")
    assert inventory.of_result(plain, "doc").counts["headers_footers"] == 0
    assert _sections(plain) == [("nextPage", False, False), ("continuous", False, False)]
    before = continuous.read_bytes()
    converted = convert.convert(office, continuous, "doc", tmp_path / "work", 60)
    assert converted.fidelity["counts"]["headers_footers"] == {"source": 2, "result": 2}
    assert converted.fidelity["complete"] is True, converted.fidelity["lost"]
    assert _sections(converted.path) == [("nextPage", False, False), ("continuous", True, True)]
    with zipfile.ZipFile(converted.path) as package:
        stories = " ".join(package.read(name).decode() for name in package.namelist()
                           if re.fullmatch(r"word/(header|footer)[0-9]*\.xml", name))
    assert "Running title of the guide" in stories and "Confidential footer" in stories
    assert continuous.read_bytes() == before


def test_a_result_whose_sections_are_not_the_source_s_is_left_as_it_was(continuous, tmp_path):
    """``restore`` makes a section continuous only where the .docx holds the .doc's sections one for one and that
    section starts a page; otherwise it answers False and leaves the file as it was."""
    result = soffice(continuous, "docx", tmp_path / "plain")  # its sections: a new page, then a continuous one
    before = result.read_bytes()
    assert doc_sections.restore(result, 3, {1}) is False  # the .doc would have three sections
    assert doc_sections.restore(result, 2, {1}) is False  # the second does not start a page
    assert result.read_bytes() == before
    assert doc_sections.restore(result, 2, {0}) is True
    assert _sections(result) == [("continuous", False, False), ("continuous", False, False)]


def test_where_the_copy_cannot_be_restored_the_first_result_stands(office, continuous, tmp_path, monkeypatch):
    """Should ``restore`` not match the copy's sections, the first result stands, its report naming the headers
    and footers it lacks."""
    monkeypatch.setattr(doc_sections, "restore", lambda result, sections, breaks: False)
    converted = convert.convert(office, continuous, "doc", tmp_path / "work", 60)
    assert converted.fidelity["counts"]["headers_footers"] == {"source": 2, "result": 0}
    assert converted.fidelity["complete"] is False
    assert converted.path.parent.parent.name == "load-1"


def test_no_paged_copy_is_converted_where_the_first_result_kept_the_headers(office, continuous, tmp_path):
    """The paged copy costs a second conversion: it is made only where LibreOffice's first result lacks headers or
    footers the .doc shows (here the plain soffice's result lacks both; the mended result has them)."""
    source = inventory.of_source(continuous, "doc")
    lacking = soffice(continuous, "docx", tmp_path / "plain")
    (tmp_path / "a").mkdir()
    assert mended.copy("doc", continuous, "converted", lambda: source, tmp_path / "a", lacking) is not None
    whole = convert.convert(office, continuous, "doc", tmp_path / "work", 60).path
    (tmp_path / "b").mkdir()
    assert mended.copy("doc", continuous, "converted", lambda: source, tmp_path / "b", whole) is None
