"""The font of a workbook's cells with East Asian text (``docshift/engine/sheet_fonts.py``).

``12561-1.xls`` names one font in every FONT record, MS PGothic (in Japanese); its cells hold Japanese text.
"""

import re
import zipfile

from conftest import ROOT
from conftest import _soffice_save as soffice

from docshift.engine import convert, sheet_fonts

SOURCE = ROOT.parent / "shared" / "corpus" / "xls" / "12561-1.xls"
GOTHIC = "\uff2d\uff33 \uff30\u30b4\u30b7\u30c3\u30af"  # MS PGothic, as the .xls writes it
FONT = re.compile(r"<font>.*?</font>|<font/>", re.DOTALL)


def fonts(result):
    """The fonts of the workbook ``result``'s font list, and the font index of each cell format."""
    with zipfile.ZipFile(result) as package:
        styles = package.read("xl/styles.xml").decode()
    listed = FONT.findall(styles.split("<fonts", 1)[1].split("</fonts>", 1)[0])
    formats = re.findall(r'<xf [^>]*fontId="([0-9]+)"', styles.split("<cellXfs", 1)[1].split("</cellXfs>", 1)[0])
    return listed, [int(font) for font in formats]


def test_cells_with_japanese_text_keep_the_xls_font(office, tmp_path):
    """A plain soffice's cell formats name DejaVu Sans, a font of no FONT record, without the Japanese charset;
    docshift's name MS PGothic (the .xls's Japanese name) with it, and every other font is the plain one's."""
    assert sheet_fonts.font_names(SOURCE) == {GOTHIC}
    plain, plain_formats = fonts(soffice(SOURCE, "xlsx", tmp_path / "plain"))
    fallback = [index for index, font in enumerate(plain) if 'val="DejaVu Sans"' in font]
    assert fallback and set(fallback) & set(plain_formats)
    ours, our_formats = fonts(convert.convert(office, SOURCE, "xls", tmp_path / "work", 60).path)
    # after LibreOffice's own come the formats of rows that no cell has (sheet_rows), with their fonts
    assert our_formats[:len(plain_formats)] == plain_formats and len(ours) >= len(plain)
    for index, (font, plain_font) in enumerate(zip(ours, plain)):
        if index in fallback:
            assert f'<name val="{GOTHIC}"/>' in font and '<charset val="128"/>' in font
            assert re.sub(r"<(name|family|charset)[^>]*/>", "", font) == \
                re.sub(r"<(name|family|charset)[^>]*/>", "", plain_font)
        else:
            assert font == plain_font
    assert not any("DejaVu" in font for font in ours)


def test_a_fallback_font_takes_its_twin_where_its_twins_agree():
    """Twins (the same size and style) that agree on a name, however they are written, give the first's bytes; twins
    of two names, none, or a font the .xls itself names leave the font as it is."""
    fallback, bold = '<font><sz val="10"/><name val="DejaVu Sans"/><family val="2"/></font>', \
        '<font><b val="true"/><sz val="10"/><name val="DejaVu Sans"/><family val="2"/></font>'
    styles = ('<styleSheet xmlns="http://schemas.openxmlformats.org/spreadsheetml/2006/main"><fonts count="{}">{}'
              '</fonts><dxfs><dxf><font><name val="DejaVu Sans"/></font></dxf></dxfs></styleSheet>')

    def renamed(listed, names):
        data = styles.format(len(listed), "".join(listed)).encode()
        written, count = sheet_fonts.renamed(data, "xl/styles.xml", names)
        return FONT.findall(written.decode().split("<fonts", 1)[1].split("</fonts>", 1)[0]), count

    twins = ['<font><sz val="10"/><name val="Arial"/><family val="2"/><charset val="134"/></font>',
             '<font><sz val="10"/><name val="Arial"/><family val="0"/></font>']
    assert renamed([*twins, fallback, bold], {"Arial"}) == ([*twins, twins[0], bold], 1)
    two_names = [twins[0], '<font><sz val="10"/><name val="Tahoma"/></font>', fallback]
    assert renamed(two_names, {"Arial", "Tahoma"}) == (two_names, 0)
    assert renamed([*twins, fallback], {"Arial", "DejaVu Sans"}) == ([*twins, fallback], 0)
    assert renamed([twins[0], bold], {"Arial"}) == ([twins[0], bold], 0)
