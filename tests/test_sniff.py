"""The sniffing table: what is accepted as .doc, .xls and .ppt before LibreOffice sees it."""

import pytest
from conftest import _soffice_save

from docshift.engine import precheck as sniff
from docshift.errors import ConversionFailed


@pytest.fixture(scope="session")
def rtf(tmp_path_factory, legacy):
    """The suite's Word document saved as RTF, which Word users often name .doc."""
    return _soffice_save(legacy["doc"], "rtf", tmp_path_factory.mktemp("rtf"))


def outcome(path, kind):
    try:
        sniff.check(path, kind)
    except ConversionFailed as failure:
        return failure.code
    return "accepted"


@pytest.mark.parametrize("real", ["doc", "xls", "ppt"])
@pytest.mark.parametrize("claimed", ["doc", "xls", "ppt"])
def test_each_type_only_under_its_own_extension(legacy, real, claimed):
    assert outcome(legacy[real], claimed) == ("accepted" if real == claimed else "unsupported_content")


def test_rtf_named_doc_is_not_a_legacy_word_file(rtf):
    assert outcome(rtf, "doc") == "unsupported_content"


@pytest.mark.parametrize("content", [b"", b"\xd0\xcf\x11\xe0", b"\xd0\xcf\x11\xe0\xa1\xb1\x1a\xe1" + b"\xff" * 600,
                                     b"PK\x03\x04 a zip", b"%PDF-1.7"])
def test_damaged_or_foreign_bytes(tmp_path, content):
    path = tmp_path / "x.doc"
    path.write_bytes(content)
    assert outcome(path, "doc") == "unsupported_content"


def test_truncated_real_file(tmp_path, legacy):
    path = tmp_path / "cut.xls"
    path.write_bytes(legacy["xls"].read_bytes()[:1500])
    assert outcome(path, "xls") == "unsupported_content"
