"""A legacy file's LibreOffice type known before its child runs (``known_type``): only where LibreOffice's deep type
detection names the same type; the child then loads it with that type's filter, as detection would have it, and
skips its own detection."""

import re
import zipfile

import pytest
from conftest import ROOT
from test_salvage import damaged

from docshift.engine import known_type
from docshift.formats import FORMATS

CORPUS = ROOT.parent / "shared" / "corpus"
# corpus files that LibreOffice's detection names otherwise (measured): Word 6 and 95, PowerPoint 95 and 4.0, and
# damaged compound files, which it takes for text
OTHERS = {
    "doc": ["Word6.doc", "Word95.doc", "Bug49933.doc",
            "clusterfuzz-testcase-minimized-POIHWPFFuzzer-5440721166139392.doc"],
    "xls": ["clusterfuzz-testcase-minimized-POIHSSFFuzzer-6483562584932352.xls"],
    "ppt": ["PPT95.ppt", "pp40only.ppt", "clusterfuzz-testcase-minimized-POIHSLFFuzzer-5306877435838464.ppt"],
}
# a field's id, which LibreOffice makes anew on every export
GUID = re.compile(rb"\{[0-9A-F]{8}-[0-9A-F]{4}-[0-9A-F]{4}-[0-9A-F]{4}-[0-9A-F]{12}\}")


def sample(kind, count=6):
    """``count`` of the corpus's files of ``kind`` small enough to be typed here, spread over their names."""
    small = sorted(path for path in (CORPUS / kind).glob(f"*.{kind}") if path.stat().st_size <= known_type.LARGEST)
    return small[::max(1, len(small) // count)][:count]


def parts(path):
    with zipfile.ZipFile(path) as package:
        return {name: GUID.sub(b"{}", package.read(name)) for name in package.namelist()}


@pytest.mark.parametrize("kind", sorted(known_type.TYPES))
def test_the_type_known_is_the_one_libreoffices_detection_names(office, tmp_path, kind):
    typed = 0
    for source in sample(kind):
        facts = office.export(source, tmp_path / f"{source.stem}.{FORMATS[kind].target}",
                              FORMATS[kind].export_filter, 60)
        known = known_type.of(source, kind)
        if known is not None:
            typed += 1
            assert known == known_type.TYPES[kind] and known[0] == facts["type"], source.name
    assert typed >= 4


@pytest.mark.parametrize("kind", sorted(OTHERS))
def test_what_detection_names_otherwise_is_left_to_it(monkeypatch, kind):
    monkeypatch.setattr(known_type, "LARGEST", 1 << 30)  # what tells them apart, not their size
    for name in OTHERS[kind]:
        assert known_type.of(CORPUS / kind / name, kind) is None, name


@pytest.mark.parametrize("kind", sorted(known_type.TYPES))
def test_a_file_loaded_as_its_known_type_converts_as_detected(office, legacy, tmp_path, monkeypatch, kind):
    # the suite's deck is larger than what is typed in the service: here it is the child's path that is tried
    monkeypatch.setattr(known_type, "LARGEST", max(known_type.LARGEST, legacy[kind].stat().st_size))
    known = known_type.of(legacy[kind], kind)
    assert known == known_type.TYPES[kind]
    results = {}
    for side, given in (("detected", None), ("known", known)):
        target = tmp_path / f"{side}.{FORMATS[kind].target}"
        facts = office.export(legacy[kind], target, FORMATS[kind].export_filter, 60, known=given)
        results[side] = ({key: facts[key] for key in ("type", "family", "media_type", "outcome", "loaded")},
                         parts(target), facts["seconds"]["detect"])
    assert results["known"][:2] == results["detected"][:2]
    assert results["known"][0]["outcome"] == "converted"
    # detection takes milliseconds; the known type is a lookup LibreOffice's registry answered before
    assert results["known"][2] < 0.001 < results["detected"][2]


def test_a_damaged_compound_file_is_left_to_detection(legacy, tmp_path):
    """LibreOffice's reader gives up on a file whose stream runs past its end, and its detection takes it for
    text."""
    assert known_type.of(legacy["doc"], "doc") is not None
    cut = damaged(legacy["doc"], tmp_path / "cut.doc", "\x05SummaryInformation")
    assert known_type.of(cut, "doc") is None


def test_another_kinds_file_and_a_large_file_are_left_to_detection(legacy, monkeypatch):
    assert known_type.of(legacy["doc"], "xls") is None
    assert known_type.of(legacy["xls"], "ppt") is None
    assert known_type.of(legacy["doc"], "doc") is not None
    monkeypatch.setattr(known_type, "LARGEST", legacy["doc"].stat().st_size - 1)
    assert known_type.of(legacy["doc"], "doc") is None
