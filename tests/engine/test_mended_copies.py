"""Legacy files LibreOffice loses part of as they are, converted from a mended copy (``mended.copy``):
a deck whose chain of saves is broken (``ppt_edits``), a workbook whose notes have boxes of no height
(``xls_notes``). Both are real files of the corpus; a plain ``soffice`` shows what LibreOffice made of them before.
"""

import random
import threading

import olefile
from conftest import ROOT
from conftest import _soffice_save as soffice

from docshift.engine import convert, inventory, xls_notes

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
