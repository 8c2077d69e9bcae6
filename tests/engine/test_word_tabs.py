"""A .doc's default tab stops (``docshift/engine/word_tabs.py``): the DOP's interval, where LibreOffice's export
writes its own 709 twips."""

import re
import zipfile

from conftest import ROOT
from conftest import _soffice_save as soffice

from docshift.engine import convert, word_tabs
from docshift.engine.inventory.package import NS_W

SOURCE = ROOT.parent / "shared" / "corpus" / "doc" / "saved-by-table.doc"


def default_tab(path):
    with zipfile.ZipFile(path) as package:
        found = re.search(rb'<w:defaultTabStop w:val="([0-9]+)"', package.read("word/settings.xml"))
    return int(found.group(1)) if found else None


def test_default_tab_stops_are_the_docs(office, tmp_path):
    """``saved-by-table.doc`` sets Word's half inch (720 twips); a plain soffice writes 709, docshift 720."""
    assert word_tabs.interval_of(SOURCE) == 720
    assert default_tab(soffice(SOURCE, "docx", tmp_path / "plain")) == 709
    assert default_tab(convert.convert(office, SOURCE, "doc", tmp_path / "work", 60).path) == 720


def test_the_interval_is_set_or_written_in_its_place():
    """LibreOffice's element gets the value; settings without one get it before what CT_Settings puts after it;
    an equal value leaves the part as it is."""
    head = f'<w:settings xmlns:w="{NS_W}"><w:zoom w:percent="100"/>'
    written = (head + '<w:defaultTabStop w:val="709"/><w:compat/></w:settings>').encode()
    assert word_tabs._set(written, "settings.xml", 720) == (written.replace(b'"709"', b'"720"'), 1)
    assert word_tabs._set(written, "settings.xml", 709) == (written, 0)
    bare = (head + "<w:characterSpacingControl w:val=\"doNotCompress\"/></w:settings>").encode()
    edited, count = word_tabs._set(bare, "settings.xml", 284)
    assert count == 1 and edited.index(b'w:val="284"') < edited.index(b"characterSpacingControl")
    assert edited.index(b"w:zoom") < edited.index(b"defaultTabStop")
