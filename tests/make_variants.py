"""Odd inputs for ``test_variants.py``: every kind of file a .doc, .xls or .ppt may really be.

Run by the suite under LibreOffice's Python (Debian's python3 with python3-uno), once a session:

    /usr/bin/python3 tests/make_variants.py OUTDIR PROFILE

It starts LibreOffice in this process (LibreOfficeKit, as the engine's children do) to write what LibreOffice can
write (RTF, SpreadsheetML 2003, OOXML, PDF, password-protected and VelvetSweatshop files) and builds
the rest by hand (BIFF4 and BIFF5, Word and Excel HTML and web archives (MHT), an OLE file with upper-case stream
names, text, PNG, ZIP, random bytes).
"""

import ctypes
import io
import os
import random
import struct
import sys
import zipfile
import zlib
from email.mime.multipart import MIMEMultipart
from email.mime.text import MIMEText
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "docshift" / "engine" / "uno"))
import forkit

# bridge (and uno, which it imports) reach this process's LibreOffice only once LibreOfficeKit runs: ``main``
bridge = uno = None

PASSWORD = "secret"


# documents LibreOffice writes ----------------------------------------------------------

def new(office, factory):
    return office.desktop.loadComponentFromURL(f"private:factory/{factory}", "_blank", 0, bridge.props(Hidden=True))


def writer(office):
    document = new(office, "swriter")
    document.getText().setString("docshift keeps every word.\nA second paragraph: 42.")
    return document


def calc(office):
    document = new(office, "scalc")
    sheets = document.getSheets()
    sheets.getByIndex(0).setName("Data")
    sheets.insertNewByName("Other", 1)
    for row in range(5):
        sheets.getByIndex(0).getCellByPosition(0, row).setString(f"row {row}")
        sheets.getByIndex(0).getCellByPosition(1, row).setValue(row * 1.5)
    return document


def impress(office):
    document = new(office, "simpress")
    pages = document.getDrawPages()
    while pages.getCount() < 3:
        pages.insertNewByIndex(pages.getCount() - 1)
    return document


def save(document, path, export_filter, **options):
    document.storeToURL(uno.systemPathToFileUrl(str(path)),
                        bridge.props(FilterName=export_filter, Overwrite=True, **options))
    bridge.close(document)  # as the engine closes one: a close LibreOffice vetoes is no failure here either
    return path


def rename_stream(path, old, new_name):
    """Rewrite one stream's name in the OLE directory (same length: the directory stays sorted)."""
    before, after = old.encode("utf-16-le") + b"\0\0", new_name.encode("utf-16-le") + b"\0\0"
    data = path.read_bytes()
    assert data.count(before) == 1 and data.index(before) % 128 == 0, old
    path.write_bytes(data.replace(before, after))


def written_by_libreoffice(office, out):
    save(writer(office), out / "rtf.doc", "Rich Text Format")
    save(writer(office), out / "docx_named.doc", "MS Word 2007 XML")
    save(writer(office), out / "encrypted.doc", "MS Word 97", Password=PASSWORD)
    save(writer(office), out / "pdf.doc", "writer_pdf_Export")
    save(writer(office), out / "doc_named.xls", "MS Word 97")
    save(writer(office), out / "docx_named.xls", "MS Word 2007 XML")
    rename_stream(save(writer(office), out / "upper_case.doc", "MS Word 97"), "WordDocument", "WORDDOCUMENT")
    save(calc(office), out / "spreadsheetml.xls", "MS Excel 2003 XML")
    save(calc(office), out / "velvet_sweatshop.xls", "MS Excel 97", Password="VelvetSweatshop")
    save(calc(office), out / "encrypted.xls", "MS Excel 97", Password=PASSWORD)
    save(calc(office), out / "xls_named.doc", "MS Excel 97")
    rename_stream(save(calc(office), out / "upper_case.xls", "MS Excel 97"), "Workbook", "WORKBOOK")
    save(impress(office), out / "pptx_named.ppt", "Impress MS PowerPoint 2007 XML")
    rename_stream(save(impress(office), out / "upper_case.ppt", "MS PowerPoint 97"), "PowerPoint Document",
                  "POWERPOINT DOCUMENT")


# documents built by hand -----------------------------------------------------------------

def record(kind, data=b""):
    return struct.pack("<HH", kind, len(data)) + data


def biff4():
    """A bare BIFF4 worksheet stream (Excel 4.0 wrote no OLE container)."""
    body = record(0x0409, struct.pack("<HHH", 0, 0x0010, 0)) + record(0x0200, struct.pack("<HHHHH", 0, 3, 0, 2, 0))
    for row in range(3):
        text = f"biff4 row {row}".encode("latin-1")
        body += record(0x0204, struct.pack("<HHHH", row, 0, 0, len(text)) + text)
        body += record(0x0203, struct.pack("<HHH", row, 1, 0) + struct.pack("<d", row * 2.5))
    return body + record(0x000A)


def biff5():
    """A BIFF5 (Excel 5.0/95) workbook stream: globals with one BOUNDSHEET, then the sheet."""
    def bof(kind):
        return record(0x0809, struct.pack("<HHHH", 0x0500, kind, 0x0DBB, 0x07CC))
    font = record(0x0031, struct.pack("<HHHHHBBBB", 200, 0, 0x7FFF, 400, 0, 0, 0, 0, 0) + b"\x05Arial")
    xfs = b"".join(record(0x00E0, struct.pack("<HHHBBII", 0, 0, 0xFFF5 if n < 16 else 1, 0x20, 0, 0, 0))
                   for n in range(17))
    sheet = bof(0x0010) + record(0x0200, struct.pack("<HHHHH", 0, 3, 0, 2, 0))
    for row in range(3):
        text = f"biff5 row {row}".encode("latin-1")
        sheet += record(0x0204, struct.pack("<HHHH", row, 0, 16, len(text)) + text)
        sheet += record(0x0203, struct.pack("<HHH", row, 1, 16) + struct.pack("<d", row * 2.5))
    sheet += record(0x000A)
    name = b"Sheet1"
    globals_ = bof(0x0005) + record(0x0042, struct.pack("<H", 1252)) + font * 5 + xfs
    sheet_at = len(globals_) + 4 + 7 + len(name) + 4  # after this BOUNDSHEET and the EOF
    globals_ += record(0x0085, struct.pack("<IBBB", sheet_at, 0, 0, len(name)) + name) + record(0x000A)
    return globals_ + sheet


def ole(streams):
    """A minimal OLE2 compound file (512-byte sectors; streams padded past the 4096-byte mini-stream
    cutoff) holding ``streams`` in its root storage."""
    end, free, fat_sector, none = 0xFFFFFFFE, 0xFFFFFFFF, 0xFFFFFFFD, 0xFFFFFFFF
    names = sorted(streams, key=lambda n: (len(n), n.upper()))
    data, fat, entries = b"", [fat_sector, end], []
    for name in names:
        blob = streams[name].ljust(4096, b"\0")
        blob += b"\0" * (-len(blob) % 512)
        first, count = 2 + len(data) // 512, len(blob) // 512
        entries.append((first, max(len(streams[name]), 4096)))
        fat += [first + n + 1 for n in range(count - 1)] + [end]
        data += blob
    fat += [free] * (128 - len(fat))

    def entry(name, kind, child, right, start, size):
        raw = name.encode("utf-16-le") + b"\0\0" if name else b""
        return (raw.ljust(64, b"\0") + struct.pack("<HBB", len(raw), kind, 1 if name else 0)
                + struct.pack("<III", none, right, child) + b"\0" * 36 + struct.pack("<IIHH", start, size, 0, 0))
    directory = entry("Root Entry", 5, 1, none, end, 0)
    for n, name in enumerate(names):
        directory += entry(name, 2, none, n + 2 if n + 1 < len(names) else none, *entries[n])
    directory += entry("", 0, none, none, 0, 0) * (3 - len(names))
    header = (bytes.fromhex("D0CF11E0A1B11AE1") + b"\0" * 16 + struct.pack("<HHHHH", 0x3E, 3, 0xFFFE, 9, 6)
              + b"\0" * 6 + struct.pack("<IIIIIIIII", 0, 1, 1, 0, 4096, end, 0, end, 0) + struct.pack("<I", 0)
              + struct.pack("<I", free) * 108)
    return header + struct.pack("<128I", *fat) + directory + data


WORD_HTML = """<html xmlns:o="urn:schemas-microsoft-com:office:office" xmlns:w="urn:schemas-microsoft-com:office:word"
xmlns="http://www.w3.org/TR/REC-html40"><head><meta http-equiv=Content-Type content="text/html; charset=windows-1252">
<meta name=ProgId content=Word.Document><meta name=Generator content="Microsoft Word 11"></head>
<body lang=EN-US><div class=Section1><p class=MsoNormal>Hello from Word HTML.</p></div></body></html>
"""
EXCEL_HTML = """<html xmlns:x="urn:schemas-microsoft-com:office:excel" xmlns="http://www.w3.org/TR/REC-html40">
<head><meta name=ProgId content=Excel.Sheet></head><body>
<table><tr><td>a</td><td>1</td></tr><tr><td>b</td><td>2</td></tr></table></body></html>
"""


def web_archive(page, kind):
    """A one-page web archive, as Word's or Excel's "Single File Web Page" is: a MIME multipart/related message."""
    message = MIMEMultipart("related")
    message["X-Document-Type"] = kind
    part = MIMEText(page, "html", "us-ascii")
    part["Content-Location"] = "file:///C:/4E5F6A7B/page.htm"
    message.attach(part)
    return message.as_bytes()


def png():
    def chunk(kind, data):
        return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data))
    pixels = b"".join(b"\0" + b"\xff\x00\x00" * 4 for _ in range(4))
    return (b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", struct.pack(">IIBBBBB", 4, 4, 8, 2, 0, 0, 0))
            + chunk(b"IDAT", zlib.compress(pixels)) + chunk(b"IEND", b""))


def archive():
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w") as package:
        package.writestr("hello.txt", "hello")
    return buffer.getvalue()


def built_by_hand(out):
    files = {
        "biff5.xls": ole({"Book": biff5()}),
        "biff5_upper_case.xls": ole({"BOOK": biff5()}),
        "biff4.xls": biff4(),
        "word_html.doc": WORD_HTML.encode("cp1252"),
        "html_table.xls": EXCEL_HTML.encode(),
        "word_mht.doc": web_archive(WORD_HTML, "Document"),
        "excel_mht.xls": web_archive(EXCEL_HTML, "Workbook"),
        "text.doc": b"Just some plain text.\nAnother line.\n",
        "text.xls": b"name,value\na,1\nb,2\n",
        "png.ppt": png(),
        "zip.xls": archive(),
        "random.doc": random.Random(1).randbytes(20000),
    }
    for name, data in files.items():
        (out / name).write_bytes(data)


def start_office(profile):
    """LibreOffice started in this process on ``profile`` (a directory), as the engine's children start it:
    its ``bridge.LibreOffice``. The process must end with ``os._exit``: LibreOfficeKit's threads hold it."""
    global bridge, uno
    os.environ["SAL_USE_VCLPLUGIN"] = "svp"
    kit = ctypes.CDLL(os.path.join(forkit.PROGRAM, "libmergedlo.so"), mode=ctypes.RTLD_GLOBAL)
    kit.libreofficekit_hook_2.restype = ctypes.c_void_p
    kit.libreofficekit_hook_2.argtypes = [ctypes.c_char_p, ctypes.c_char_p]
    if not kit.libreofficekit_hook_2(forkit.PROGRAM.encode(), Path(profile).as_uri().encode()):
        raise SystemExit("LibreOfficeKit did not start")
    import bridge as loaded
    import uno as loaded_uno
    bridge, uno = loaded, loaded_uno
    return bridge.LibreOffice(uno.getComponentContext())


def main(outdir, profile):
    """Writes the files into ``outdir``; LibreOffice's profile goes in ``profile``, which the caller removes once
    this process has ended: LibreOfficeKit's threads go on writing in it until ``os._exit``, so removing it
    here raced them (CI saw ``Directory not empty: 'user'``)."""
    out = Path(outdir).resolve()
    out.mkdir(parents=True, exist_ok=True)
    built_by_hand(out)
    written_by_libreoffice(start_office(profile), out)
    os._exit(0)  # LibreOfficeKit's threads hold the process otherwise


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2])
