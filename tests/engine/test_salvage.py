"""A damaged compound file converted from what can be read of it (``engine/mended.py``, salvaged copies).

The suite's legacy files, saved by LibreOffice, are damaged the way a file cut short is: the directory entry of a
stream claims more bytes than the file holds, so its chain runs past the end. LibreOffice's reader then gives up on
the whole file and its type detection takes it for text (a plain ``soffice`` makes a sheet of its bytes); olefile
reads the rest stream by stream."""

import shutil
import struct

import olefile
import pytest
from conftest import DOC_PARAGRAPHS, PPT_TITLES, XLS_SHEETS

from docshift.engine import cfb, convert, inventory, mended
from docshift.errors import ConversionFailed

PAST_THE_END = 0xF0000000  # bytes a damaged entry claims: more than any upload holds
SUMMARY = "\x05SummaryInformation"
CUT_WORKBOOK = 600  # bytes of a workbook's stream that hold its first records, not a sheet's cells


def damaged(source, target, stream, size=PAST_THE_END, start=None):
    """A copy of ``source`` whose root-level ``stream`` claims ``size`` bytes in its directory entry, or, given
    ``start``, begins that many sectors past the file's last."""
    shutil.copyfile(source, target)
    with olefile.OleFileIO(str(source)) as ole:
        sid = next(entry.sid for entry in ole.root.kids if entry.name == stream)
        chain, sector = [], ole.first_dir_sector
        while sector not in (olefile.ENDOFCHAIN, olefile.FREESECT):
            chain.append(sector)
            sector = ole.fat[sector]
        per_sector = ole.sectorsize // 128
        offset = (chain[sid // per_sector] + 1) * ole.sectorsize + sid % per_sector * 128
        sectors = ole.nb_sect
    with open(target, "r+b") as f:
        if start is None:
            f.seek(offset + 120)  # the entry's stream size
            f.write(struct.pack("<I", size))
        else:
            f.seek(offset + 116)  # the entry's first sector
            f.write(struct.pack("<I", sectors + start))
    return target


def words(text):
    return sum(len("".join(part.split())) for part in text)


def looped(source, target):
    """A copy of ``source`` whose directory chain loops: the FAT sends its last sector back to its first (a
    corruption olefile reads past, as far as the file's size, and LibreOffice's reader gives up on)."""
    shutil.copyfile(source, target)
    with olefile.OleFileIO(str(source)) as ole:
        chain, sector = [], ole.first_dir_sector
        while sector not in (olefile.ENDOFCHAIN, olefile.FREESECT):
            chain.append(sector)
            sector = ole.fat[sector]
        per_sector = ole.sectorsize // 4
    with open(target, "r+b") as f:
        difat = struct.unpack("<109I", f.read(512)[76:])  # the header's FAT sectors
        f.seek((difat[chain[-1] // per_sector] + 1) * 512 + chain[-1] % per_sector * 4)
        f.write(struct.pack("<I", chain[0]))
    return target


def assert_holds_the_whole(converted, kind):
    """The result of a damaged copy of the suite's ``kind`` file holds all of its sheets' cells, or its slides and
    text, and its report says it was made from a damaged file and names nothing else lost."""
    held = inventory.of_result(converted.path, kind)
    if kind == "xls":
        assert converted.fidelity["counts"]["sheets"] == {"source": len(XLS_SHEETS), "result": len(XLS_SHEETS)}
        assert held.counts["cells"] == sum(len(cells) for cells in XLS_SHEETS.values())
    elif kind == "ppt":
        assert held.counts["slides"] == len(PPT_TITLES)
        assert held.counts["characters"] >= words(PPT_TITLES)
    else:
        assert held.counts["characters"] >= words(DOC_PARAGRAPHS)
    assert converted.fidelity["complete"] is False
    (loss,) = [loss for loss in converted.fidelity["lost"] if loss["what"] == "streams"]
    assert "damaged" in loss["detail"]
    assert [loss for loss in converted.fidelity["lost"] if loss["what"] != "streams"] == []
    return loss


@pytest.mark.parametrize("kind", ["doc", "xls", "ppt"])
def test_a_file_whose_summary_runs_past_its_end_converts_from_the_rest(office, legacy, kind, tmp_path):
    source = damaged(legacy[kind], tmp_path / f"cut.{kind}", SUMMARY)
    before = source.read_bytes()
    converted = convert.convert(office, source, kind, tmp_path / "work", 60)
    assert (tmp_path / "work" / f"salvaged.{kind}").exists()  # LibreOffice refused the file as it is
    # the report names the stream that is not in the result
    loss = assert_holds_the_whole(converted, kind)
    assert loss["count"] == 1 and "SummaryInformation" in loss["detail"]
    assert source.read_bytes() == before


@pytest.mark.parametrize("kind", ["doc", "xls", "ppt"])
def test_a_file_whose_directory_chain_loops_converts_from_its_streams(office, legacy, kind, tmp_path):
    """Every stream reads whole, so only the chains show the damage: olefile reports none."""
    source = looped(legacy[kind], tmp_path / f"looped.{kind}")
    with olefile.OleFileIO(str(source)) as ole:
        assert not ole.parsing_issues
    assert mended.damaged(source)
    converted = convert.convert(office, source, kind, tmp_path / "work", 60)
    assert (tmp_path / "work" / f"salvaged.{kind}").exists()  # LibreOffice refused the file as it is
    assert assert_holds_the_whole(converted, kind)["count"] == 0


def test_a_sound_files_chains_do_not_cross(legacy):
    for path in legacy.values():
        with cfb.CompoundFile(path) as ole:
            assert not cfb.chains_cross(ole)


def test_a_file_whose_own_stream_is_damaged_is_refused_naming_the_damage(office, legacy, tmp_path):
    """Without its Workbook stream whole there is nothing to salvage: the refusal says why, as before unbilled."""
    source = damaged(legacy["xls"], tmp_path / "cut.xls", "Workbook")
    with pytest.raises(ConversionFailed) as refused:
        convert.convert(office, source, "xls", tmp_path / "work", 60)
    assert refused.value.code == "unsupported_content"
    assert mended.DAMAGED in refused.value.message
    assert not (tmp_path / "work" / "salvaged.xls").exists()


@pytest.mark.parametrize(("kind", "stream"), [("doc", "WordDocument"), ("xls", "Workbook"),
                                            ("ppt", "PowerPoint Document")])
def test_a_file_whose_own_stream_starts_past_its_end_fails_naming_the_damage(office, legacy, kind, stream, tmp_path):
    """The directory and the FAT are whole, so LibreOffice takes the file for what it is, and its import finds
    nothing to read: the failure says that the file is damaged, not only that it could not be read."""
    source = damaged(legacy[kind], tmp_path / f"cut.{kind}", stream, start=5)
    with pytest.raises(ConversionFailed) as failed:
        convert.convert(office, source, kind, tmp_path / "work", 60)
    assert failed.value.code == "conversion_failed"
    assert failed.value.message == f"LibreOffice could not read this file. {mended.DAMAGED}"
    assert not (tmp_path / "work" / f"salvaged.{kind}").exists()  # its own stream is what cannot be read


def test_a_salvaged_workbook_that_loads_empty_leaves_the_refusal(office, legacy, tmp_path):
    """A Workbook stream that reads whole but was cut short itself (its first records, written as a stream of that
    length): the copy loads as one empty sheet, which is no document to bill, so the refusal stands."""
    with cfb.CompoundFile(legacy["xls"]) as ole:
        root = cfb.read_storage(ole, "", 1 << 20)
    workbook = next(entry for entry in root.children if entry.name == "Workbook")
    workbook.data = workbook.data[:CUT_WORKBOOK]
    (tmp_path / "short.xls").write_bytes(cfb.write(root))
    source = damaged(tmp_path / "short.xls", tmp_path / "cut.xls", SUMMARY)
    with pytest.raises(ConversionFailed) as refused:
        convert.convert(office, source, "xls", tmp_path / "work", 60)
    assert (tmp_path / "work" / "load-mended").exists()  # the salvaged copy converted, and was not kept
    assert refused.value.code == "unsupported_content" and mended.DAMAGED in refused.value.message


def test_a_file_cut_within_its_signature_is_refused_as_damaged(office, legacy, tmp_path):
    """A package ships a "deck" of 6 bytes, the first of a compound file's signature: nothing to convert, and the
    refusal says why."""
    source = tmp_path / "cut.ppt"
    source.write_bytes(legacy["ppt"].read_bytes()[:6])
    with pytest.raises(ConversionFailed) as refused:
        convert.convert(office, source, "ppt", tmp_path / "work", 60)
    assert refused.value.code == "unsupported_content" and mended.DAMAGED in refused.value.message
    source.write_bytes(legacy["ppt"].read_bytes()[:3])  # too little to say it was a compound file
    assert not mended.damaged(source)


def test_a_sound_file_that_is_no_document_is_not_salvaged(office, tmp_path):
    """Text named .doc is refused as before: no copy is made, and the refusal does not speak of damage."""
    source = tmp_path / "notes.doc"
    source.write_text("plain text, not a Word document\n" * 20)
    with pytest.raises(ConversionFailed) as refused:
        convert.convert(office, source, "doc", tmp_path / "work", 60)
    assert refused.value.code == "unsupported_content" and "damaged" not in refused.value.message
    assert not mended.damaged(source)
    assert not (tmp_path / "work" / "salvaged.doc").exists()
