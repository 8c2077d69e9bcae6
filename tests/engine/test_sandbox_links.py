"""Linked content stays out of what LibreOffice converts in its sandbox: pictures, text, sections, formulas and
DDE links to the host's files or to a listener on the loopback are neither fetched nor copied in."""

import http.server
import secrets
import struct
import subprocess
import threading
import time
import zipfile
import zlib
from pathlib import Path
from typing import ClassVar

import pytest
from conftest import _soffice_save, free_port_block

from docshift.engine.forkit import Forkit
from docshift.formats import FORMATS

RTF = '{{\\rtf1\\ansi\\deff0{{\\fonttbl{{\\f0 Arial;}}}}\\f0 Before.\\par\n{{\\field{{\\*\\fldinst {field}}}' \
      '{{\\fldrslt stale}}}}\\par\nAfter.\\par}}'
NS = ('xmlns:office="urn:oasis:names:tc:opendocument:xmlns:office:1.0" '
      'xmlns:text="urn:oasis:names:tc:opendocument:xmlns:text:1.0" '
      'xmlns:table="urn:oasis:names:tc:opendocument:xmlns:table:1.0" '
      'xmlns:draw="urn:oasis:names:tc:opendocument:xmlns:drawing:1.0" xmlns:xlink="http://www.w3.org/1999/xlink" '
      'xmlns:svg="urn:oasis:names:tc:opendocument:xmlns:svg-compatible:1.0" '
      'xmlns:of="urn:oasis:names:tc:opendocument:xmlns:of:1.2" office:version="1.2"')
FODT = ('<?xml version="1.0" encoding="UTF-8"?><office:document ' + NS + ' office:mimetype="application/'
        'vnd.oasis.opendocument.text"><office:body><office:text><text:p>Before.</text:p>{body}'
        '<text:p>After.</text:p></office:text></office:body></office:document>')
FODS = ('<?xml version="1.0" encoding="UTF-8"?><office:document ' + NS + ' office:mimetype="application/'
        'vnd.oasis.opendocument.spreadsheet"><office:body><office:spreadsheet><table:table table:name="Sheet1">'
        '{shapes}<table:table-row><table:table-cell office:value-type="string"><text:p>x</text:p>'
        '</table:table-cell>{cells}</table:table-row></table:table></office:spreadsheet></office:body>'
        '</office:document>')


def image(href, name):
    return (f'<draw:frame draw:name="{name}" svg:width="2cm" svg:height="2cm" text:anchor-type="as-char" svg:x="1cm" '
            f'svg:y="1cm"><draw:image xlink:href="{href}" xlink:type="simple" xlink:show="embed" '
            'xlink:actuate="onLoad"/></draw:frame>')


def formula(text):
    return f'<table:table-cell table:formula="of:={text}"/>'


# name: (suffix of the source LibreOffice makes the legacy file from, legacy kind, source text)
LINKED = {
    "includepicture_http": (".rtf", "doc", RTF.format(field='INCLUDEPICTURE "{http}/picture.png"')),
    "includepicture_http_d": (".rtf", "doc", RTF.format(field='INCLUDEPICTURE "{http}/picture-d.png" \\\\d')),
    "includepicture_file": (".rtf", "doc", RTF.format(field='INCLUDEPICTURE "{secret_png}"')),
    "includetext_http": (".rtf", "doc", RTF.format(field='INCLUDETEXT "{http}/text.txt"')),
    "includetext_secret": (".rtf", "doc", RTF.format(field='INCLUDETEXT "{secret_txt}"')),
    "includetext_passwd": (".rtf", "doc", RTF.format(field='INCLUDETEXT "file:///etc/passwd"')),
    "dde_field": (".rtf", "doc", RTF.format(field='DDEAUTO soffice "{secret_txt_path}" "A1"')),
    "html_img": (".html", "doc", '<html><head><link rel="stylesheet" href="{http}/style.css"></head><body><p>Hello'
                                 '</p><img src="{http}/img.png"><img src="{secret_png}"></body></html>'),
    "linked_images": (".fodt", "doc", FODT.format(body="<text:p>" + image("{http}/w.png", "I1")
                                                  + image("{secret_png}", "I2") + "</text:p>")),
    "linked_ole_object": (".fodt", "doc", FODT.format(
        body='<text:p><draw:frame draw:name="O1" text:anchor-type="as-char" svg:width="5cm" svg:height="2cm">'
             '<draw:object xlink:href="{secret_txt}" xlink:type="simple" xlink:show="embed" xlink:actuate="onLoad"/>'
             '</draw:frame></text:p>')),
    "linked_sections": (".fodt", "doc", FODT.format(
        body='<text:section text:name="S1"><text:section-source xlink:href="file:///etc/passwd" '
             'xlink:type="simple"/></text:section><text:section text:name="S2"><text:section-source '
             'xlink:href="{http}/section.html" xlink:type="simple"/></text:section>')),
    "webservice": (".fods", "xls", FODS.format(shapes="", cells=formula('WEBSERVICE(&quot;{http}/ws.txt&quot;)'))),
    "external_references": (".fods", "xls", FODS.format(shapes="", cells=formula(
        "['file:///etc/passwd'#$Sheet1.A1]") + formula("['{secret_txt}'#$Sheet1.A1]")
        + formula("['{http}/book.ods'#$Sheet1.A1]"))),
    "dde_formula": (".fods", "xls", FODS.format(shapes="", cells=formula(
        'DDE(&quot;soffice&quot;;&quot;{secret_txt_path}&quot;;&quot;A1&quot;)'))),
    "sheet_images": (".fods", "xls", FODS.format(shapes="<table:shapes>" + image("{http}/c.png", "I1")
                                                 + image("{secret_png}", "I2") + "</table:shapes>", cells="")),
}
CANARY = "canary-" + secrets.token_hex(8)


def png(text):
    """A 1x1 PNG carrying ``text`` in a tEXt chunk, so a copied picture shows in the result's bytes."""
    def chunk(kind, data):
        return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data))
    return (b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", struct.pack(">IIBBBBB", 1, 1, 8, 0, 0, 0, 0))
            + chunk(b"tEXt", b"Comment\0" + text.encode()) + chunk(b"IDAT", zlib.compress(b"\0\0"))
            + chunk(b"IEND", b""))


class Listener(http.server.BaseHTTPRequestHandler):
    hits: ClassVar[list] = []

    def do_GET(self):
        Listener.hits.append(self.path)
        body = png(f"http-{CANARY}") if self.path.endswith(".png") else f"http-{CANARY}".encode()
        self.send_response(200)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args):
        pass


@pytest.fixture(scope="module")
def linked(tmp_path_factory):
    """``(files, listener)``: each linked document as a real .doc/.xls, and a loopback HTTP
    listener on the port they link to; the secrets they link are planted after the files are made,
    so the making could not copy them in."""
    out = tmp_path_factory.mktemp("linked")
    port = free_port_block()
    secret_dir = out / "secret"
    values = {"http": f"http://127.0.0.1:{port}", "secret_png": (secret_dir / "host.png").as_uri(),
              "secret_txt": (secret_dir / "secret.txt").as_uri(), "secret_txt_path": str(secret_dir / "secret.txt")}
    files = {}
    for name, (suffix, kind, text) in LINKED.items():
        source = out / f"{name}{suffix}"
        for key, value in values.items():  # the RTF's own braces rule out str.format
            text = text.replace(f"{{{key}}}", value)
        source.write_text(text)
        fmt = "doc:MS Word 97" if kind == "doc" else "xls:MS Excel 97"
        files[name] = (_soffice_save(source, fmt, out), kind)
    secret_dir.mkdir()
    (secret_dir / "host.png").write_bytes(png(f"file-{CANARY}"))
    (secret_dir / "secret.txt").write_text(f"file-{CANARY}\n")
    for path, _ in files.values():
        assert CANARY.encode() not in path.read_bytes()
    server = http.server.ThreadingHTTPServer(("127.0.0.1", port), Listener)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    yield files, Listener.hits
    server.shutdown()
    server.server_close()


PASSWD = Path("/etc/passwd").read_text().splitlines()[0]


def leaks(result):
    """What of the host or of the listener the result holds."""
    with zipfile.ZipFile(result) as z:
        blob = b"".join(z.read(name) for name in z.namelist())
    return [what for what in (CANARY, PASSWD) if what.encode() in blob]


def convert_all(office, files, tmp_path):
    found = {}
    for name, (path, kind) in files.items():
        result = tmp_path / f"{name}.{FORMATS[kind].target}"
        try:
            office.export(path, result, FORMATS[kind].export_filter, 60)
        except Exception as error:  # a failed conversion leaks nothing; say so
            found[name] = f"failed: {type(error).__name__}"
            continue
        found[name] = leaks(result)
    return found


def test_linked_content_stays_out(linked, tmp_path):
    files, hits = linked
    office = Forkit(tmp_path / "office", name="linked")
    try:
        del hits[:]
        found = convert_all(office, files, tmp_path)
    finally:
        office.close()
    time.sleep(0.5)
    assert hits == []
    assert {name: what for name, what in found.items() if what and not str(what).startswith("failed")} == {}
    assert sum(what == [] for what in found.values()) >= len(LINKED) - 2, found


def test_a_bare_libreoffice_does_fetch_them(linked, tmp_path):
    """The control: the linked pictures are fetched by a plain ``soffice --convert-to``."""
    files, hits = linked
    del hits[:]
    for name in ("html_img", "linked_images", "sheet_images"):
        path, kind = files[name]
        subprocess.run(["soffice", "--headless", "--norestore", f"-env:UserInstallation={(tmp_path / name).as_uri()}",
                        "--convert-to", FORMATS[kind].target, "--outdir", str(tmp_path / "out"), str(path)],
                       capture_output=True, timeout=120)
    assert hits

