"""A package written again (``ooxml.rewrite``) keeps the members it does not change as they are stored
(``docshift/engine/zipcopy.py``)."""

import subprocess
import zipfile

import pytest

from docshift.engine import ooxml, zipcopy

TEXT = b"<w:t>" + b"the same words again and again, " * 400 + b"</w:t>"


def package(path):
    """A package of a part deflated at zlib's level 1 (zipfile's own writes level 6), a stored one, one with a name
    outside ASCII, one to edit and one to drop."""
    with zipfile.ZipFile(path, "w") as made:
        made.writestr("word/document.xml", TEXT, compress_type=zipfile.ZIP_DEFLATED, compresslevel=1)
        made.writestr("media/image1.png", b"\x89PNG" + bytes(range(256)) * 8, compress_type=zipfile.ZIP_STORED)
        made.writestr("word/m\u00e9dia.xml", TEXT[:500], compress_type=zipfile.ZIP_DEFLATED, compresslevel=1)
        made.writestr("word/styles.xml", b"<styles/>", compress_type=zipfile.ZIP_DEFLATED)
        made.writestr("word/drop.xml", b"<gone/>", compress_type=zipfile.ZIP_DEFLATED)
    return path


def rewritten(path):
    with zipfile.ZipFile(path) as src:
        before = {info.filename: info for info in src.infolist()}
        ooxml.rewrite(src, path, {"word/styles.xml": b"<styles edited='1'/>", "media/image1.png": b"\x89PNG new"},
                      {"word/added.xml": b"<added/>"}, {"word/drop.xml"})
    with zipfile.ZipFile(path) as result:
        assert result.testzip() is None
        assert [info.filename for info in result.infolist()] == [
            "word/document.xml", "media/image1.png", "word/m\u00e9dia.xml", "word/styles.xml", "word/added.xml"]
        assert result.read("word/document.xml") == TEXT
        assert result.read("word/styles.xml") == b"<styles edited='1'/>"
        assert result.read("media/image1.png") == b"\x89PNG new"
        assert result.read("word/added.xml") == b"<added/>"
        after = {info.filename: info for info in result.infolist()}
    assert after["media/image1.png"].compress_type == zipfile.ZIP_STORED
    assert after["word/added.xml"].compress_type == zipfile.ZIP_DEFLATED
    for name in ("word/document.xml", "word/m\u00e9dia.xml", "word/styles.xml"):
        assert (after[name].date_time, after[name].external_attr) == (before[name].date_time,
                                                                     before[name].external_attr)
    assert subprocess.run(["unzip", "-tqq", str(path)], capture_output=True).returncode == 0
    return before, after


def test_unchanged_members_keep_their_stored_bytes(tmp_path):
    """A part deflated at level 1 keeps its compressed size (inflating and deflating it again at zipfile's level
    would shrink it); the edited, added and dropped parts are as asked; unzip and zipfile read the package."""
    before, after = rewritten(package(tmp_path / "result.docx"))
    for name in ("word/document.xml", "word/m\u00e9dia.xml"):
        assert (after[name].compress_size, after[name].CRC) == (before[name].compress_size, before[name].CRC)


@pytest.mark.parametrize("limit", [("MEMBERS", 5), ("LIMIT", 2000)])
def test_a_package_it_cannot_write_plainly_goes_through_zipfile(tmp_path, monkeypatch, limit):
    """Past what it writes (here, as if five members were too many, or a package of 2,000 bytes too large),
    ``zipcopy`` writes nothing and zipfile writes the same package, each part deflated again."""
    path = package(tmp_path / "result.docx")
    assert path.stat().st_size > 2000
    monkeypatch.setattr(zipcopy, *limit)
    with zipfile.ZipFile(path) as src, (tmp_path / "out").open("wb") as out:
        assert zipcopy.write(src, path, out, {}, {"a.xml": b"<a/>"}, ()) is False
        assert out.tell() == 0
    before, after = rewritten(path)
    assert after["word/document.xml"].compress_size < before["word/document.xml"].compress_size


def test_a_member_whose_local_header_is_not_where_it_is_said_to_be_is_unreadable(tmp_path):
    """The central directory names an offset where no local header is: the package stays as it was."""
    path = package(tmp_path / "result.docx")
    data = bytearray(path.read_bytes())
    data[0:4] = b"XX\x03\x04"
    path.write_bytes(bytes(data))
    with zipfile.ZipFile(path) as src, pytest.raises(ooxml.Unreadable):
        ooxml.rewrite(src, path, {"word/styles.xml": b"<styles/>"})
    assert path.read_bytes() == bytes(data)
