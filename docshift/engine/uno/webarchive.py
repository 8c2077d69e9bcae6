"""A web archive (MHT: MIME ``multipart/related``, RFC 2557) that Word or Excel saved under ``.doc`` or ``.xls``,
unpacked into pages that LibreOffice imports. Run by the bridge under LibreOffice's Python, inside the sandbox.

Word's and Excel's "Single File Web Page" is a MIME message: the page as one part and each picture, style sheet and,
for a workbook, each sheet's page as the others, named by their ``Content-Location``. Office opens it under a legacy
extension; LibreOffice has no import for it and detects it as plain text. Its parts are written into a folder of the
child's scratch space, where they stood beside the page, so that the page's relative links find its pictures; the
page is written under the source's own extension, and LibreOffice's detection then takes it as it takes a Word-saved
HTML file under ``.doc`` or an HTML table under ``.xls``. A workbook whose sheets are pages of their own
(``x:ExcelWorksheet``'s ``x:WorksheetSource``) is each sheet's page, gathered into one document in the workbook's order
and named as the workbook names them.

Only parts that stood in the page's own folder or below it are written; a name is kept to safe characters, so no
part writes outside the folder. Python's ``email`` reads the message.
"""

import base64
import email
import email.policy
import email.utils
import html
import os
import re
import urllib.parse
from dataclasses import dataclass, field
from typing import Any

import excelpage

TYPE = "web_archive"  # the report's type: docshift's name, as LibreOffice has none for it
HEAD = 4096  # bytes read to tell a MIME message
MAX_PARTS = 2000
MAX_DEPTH = 4  # folders below the page's a part may stand in
MIME = re.compile(rb"^\s*(?:[!-9;-~]+:[^\r\n]*\r?\n(?:[ \t][^\r\n]*\r?\n)*)*?mime-version\s*:", re.IGNORECASE)
RELATED = re.compile(rb"^content-type\s*:\s*multipart/related", re.IGNORECASE | re.MULTILINE)
COMMENT = re.compile(r"<!--.*?-->", re.DOTALL)
# an <img> element's start up to its src value, then the value (quoted either way or not)
IMAGE = re.compile(r"(<img\b[^>]*?\ssrc\s*=\s*)(?:\"([^\"]*)\"|'([^']*)'|([^\s>]+))", re.IGNORECASE)
SHEET = re.compile(r"<x:ExcelWorksheet>(.*?)</x:ExcelWorksheet>", re.IGNORECASE | re.DOTALL)
NAME = re.compile(r"<x:Name>(.*?)</x:Name>", re.IGNORECASE | re.DOTALL)
SOURCE = re.compile(r"<x:WorksheetSource\s+HRef\s*=\s*[\"']([^\"']+)[\"']", re.IGNORECASE)
UNSAFE = re.compile(r"[^A-Za-z0-9._ -]")
LINK = re.compile(r"<link\b[^>]*>", re.IGNORECASE)
STYLESHEET = re.compile(r"\brel\s*=\s*[\"']?stylesheet\b", re.IGNORECASE)
HREF = re.compile(r"\bhref\s*=\s*[\"']?([^\"'\s>]+)", re.IGNORECASE)
# an HTML page: its first tag, after a byte order mark, blanks and comments (each up to its first end: a comment
# that could run past one tried every way of cutting twenty of them); and Excel's marks of a cell's value or format
# in it, and the charset its head names
HTML_PAGE = re.compile(rb"^(?:\xef\xbb\xbf)?\s*(?:<!--(?:(?!-->).)*-->\s*|<\?xml[^>]*>\s*)*"
                       rb"<(?:!doctype\s+html|html|head|meta|style|title|body|table)\b", re.IGNORECASE | re.DOTALL)
EXCEL_MARKS = re.compile(rb"mso-number-format|mso-xlrowspan|\bx:(?:str|num)\b", re.IGNORECASE)
CHARSET = re.compile(rb"<meta\b[^>]*charset\s*=\s*[\"']?([A-Za-z0-9_.:-]+)", re.IGNORECASE)
MAX_PAGE = 16 << 20  # more than any upload: larger is left to LibreOffice as it is
# the document properties a page gives its workbook (``XDocumentProperties``), and PropertyAttribute.REMOVABLE, as
# the user-defined ones of a loaded file are
PROPERTIES = ("Title", "Subject", "Description", "Keywords", "Author", "Generator", "Language", "CreationDate",
              "ModifiedBy", "ModificationDate", "TemplateName")
REMOVABLE = 128


@dataclass
class Archive:
    """What a web archive was unpacked into: the page LibreOffice loads, and for a workbook saved a page a sheet, the
    pages of its other sheets; ``names``: the workbook's sheet names, in its order ([] when it names none);
    ``pictures``: how many pictures its pages show (``pictures``), what the result is to hold; for a workbook,
    ``placed``: where each picture stands (:class:`excelpage.Placed`), ``formatted``: its cells' number formats
    (sheet, row, column, format code, whether its value is given), and ``noted``: its cells' comments (sheet, row,
    column, text), all given the sheets after the pages load."""
    page: str
    sheets: list[str] = field(default_factory=list)
    names: list[str] = field(default_factory=list)
    pictures: int = 0
    placed: list = field(default_factory=list)
    formatted: list = field(default_factory=list)
    noted: list = field(default_factory=list)
    mht: bool = True  # False: an HTML page under .xls, the source itself made ready for Calc (``html_workbook``)

    def given(self):
        """Whether the sheets are given anything after the pages load."""
        return bool(self.placed or self.formatted or self.noted)

    def facts(self):
        """What the report tells the worker of the archive itself, read here rather than by LibreOffice."""
        return {"pictures": self.pictures, "sheets": self.names}


@dataclass
class Message:
    """A web archive as read: its page (the root part), every part, and the folder the page stood in (a URL)."""
    root: Any
    parts: list
    base: str

    def text(self, part=None):
        """A part (the page by default) decoded as its charset says; a charset Python does not know, as Latin-1."""
        part = self.root if part is None else part
        data = part.get_payload(decode=True) or b""
        try:
            return data.decode(part.get_content_charset() or "latin-1", "replace")
        except LookupError:
            return data.decode("latin-1")

    def find(self, link, page=None):
        """The part that ``link``, relative to ``page`` (the archive's page by default), names; None when none is. A
        ``cid:`` link names a part by its ``Content-ID`` (RFC 2392), as a page saved from a mail does."""
        link = link.strip()
        if link[:4].lower() == "cid:":
            wanted = urllib.parse.unquote(link[4:])
            return next((part for part in self.parts if (part.get("Content-ID") or "").strip(" <>") == wanted), None)
        wanted = urllib.parse.urljoin(_location(page) if page is not None else self.base, link)
        return next((part for part in self.parts if _location(part) == wanted), None)


def read(path):
    """The :class:`Message` of the web archive at ``path``; None when it is no web archive or its page is no HTML."""
    with open(path, "rb") as given:
        head = given.read(HEAD)
        if not MIME.match(head) or not RELATED.search(head):
            return None
        given.seek(0)
        message = email.message_from_binary_file(given, policy=email.policy.compat32)
    parts = [part for part in message.walk() if not part.is_multipart()][:MAX_PARTS]
    root = _root(message, parts)
    return None if root is None else Message(root, parts, urllib.parse.urljoin(_location(root), "."))


def unpack(path, directory):
    """The :class:`Archive` the web archive at ``path`` was unpacked into under ``directory``; None when ``path`` is
    no web archive (then nothing is written)."""
    message = read(path)
    if message is None:
        return None
    os.makedirs(directory, exist_ok=True)
    written = {}
    for part in message.parts:
        relative = _relative(_location(part), message.base) if part is not message.root else None
        if relative:
            target = os.path.join(directory, *relative)
            os.makedirs(os.path.dirname(target), exist_ok=True)
            with open(target, "wb") as out:
                out.write(part.get_payload(decode=True) or b"")
            written["/".join(relative)] = target
    stem, extension = os.path.splitext(os.path.basename(path))
    workbook = extension.lower() == ".xls"
    sheets, names, listed, given = [], [], sheet_list(message.text()), ([], [], [])
    for number, (name, source) in enumerate(listed, 1):
        names.append(name)
        relative = _relative(urllib.parse.urljoin(message.base, source), message.base) if source else None
        found = written.get("/".join(relative)) if relative else None
        if found:  # a copy under the source's extension, beside the sheet's page: its links still hold
            copy = os.path.join(os.path.dirname(found), f"{stem}-sheet{number}{extension}")
            with open(found, "rb") as sheet:
                data = sheet.read()
            if workbook:
                data, more = _for_calc(message, message.find(source), data, number - 1, written)
                for mine, added in zip(given, more):
                    mine += added
            with open(copy, "wb") as out:
                out.write(data)
            sheets.append(copy)
    if names and len(sheets) != len(names):
        sheets, given = [], ([], [], [])  # a sheet's page is missing: the archive's own page is loaded
    if sheets:
        main = sheets.pop(0)
    else:  # written last: no part of the archive takes its place
        main = os.path.join(directory, stem + extension)
        if workbook:
            data, given = _for_calc(message, message.root, message.root.get_payload(decode=True) or b"", 0, written)
        else:
            data = _inlined(message)
        with open(main, "wb") as out:
            out.write(data)
    return Archive(main, sheets, names, len(pictures(message, listed)), *given)


def html_workbook(path, directory):
    """The :class:`Archive` (``mht`` False) of an HTML page under ``.xls`` that carries Excel's marks of its cells'
    values and formats (``x:num``, ``x:str``, ``mso-number-format``, ``mso-xlrowspan``): a table a program exported
    "for Excel", as many web applications do, or a page Excel saved. Calc's HTML import reads none of those marks but
    a number format of a class, so that an ID or a postcode marked as text in its cell's own style (``00123``) lost
    its zeros, a plain ``soffice`` too. The page is made ready as a web archive's sheet is (``excelpage.for_calc``),
    written into ``directory`` under the source's name, and its cells are given their formats and comments once it
    loaded. None where the source is no such page (then nothing is written)."""
    stem, extension = os.path.splitext(os.path.basename(path))
    if extension.lower() != ".xls":
        return None
    with open(path, "rb") as given:
        data = given.read(HEAD)
        if not HTML_PAGE.match(data):  # a workbook's compound file, most often: not read further
            return None
        data += given.read(MAX_PAGE + 1 - len(data))
    if len(data) > MAX_PAGE or not EXCEL_MARKS.search(data):
        return None
    charset = CHARSET.search(data[:HEAD])
    try:
        text = data.decode(charset.group(1).decode("ascii") if charset else "utf-8")
    except (LookupError, UnicodeDecodeError):
        text = data.decode("latin-1")
    formats = excelpage.formats_of(text)  # its own style blocks: a linked style sheet is not fetched
    _, formatted, noted = excelpage.read(text, formats)
    os.makedirs(directory, exist_ok=True)
    page = os.path.join(directory, stem + extension)
    with open(page, "wb") as out:
        out.write(excelpage.for_calc(data, formats))
    return Archive(page, formatted=[(0, *cell) for cell in formatted], noted=[(0, *cell) for cell in noted],
                   mht=False)


def _for_calc(message, page, data, sheet, written):
    """A workbook's ``page`` (a part; ``data``, its bytes) as Calc is to import it (``excelpage.for_calc``), and what
    its sheet, of index ``sheet``, is given once it loaded: its :class:`excelpage.Placed` pictures, those whose
    picture is in the archive and was written (``written``: its path below the folder -> the file); its cells' number
    formats (sheet, row, column, format code, whether its value is given); and their comments (sheet, row, column,
    text)."""
    if page is None:
        return excelpage.for_calc(data, {}), ([], [], [])
    text = message.text(page)
    formats = excelpage.formats_of(text, _styles(message, page))
    found, formatted, noted = excelpage.read(text, formats)
    placed = []
    for row, column, left, top, width, height, link in found:
        part = message.find(html.unescape(link), page)
        relative = _relative(_location(part), message.base) if part is not None else None
        target = written.get("/".join(relative)) if relative else None
        if target and part.get_content_maintype() == "image":
            placed.append(excelpage.Placed(sheet, row, column, left, top, width, height, target))
    return excelpage.for_calc(data, formats), (placed, [(sheet, *cell) for cell in formatted],
                                               [(sheet, *cell) for cell in noted])


def _styles(message, page):
    """The text of the style sheets in the archive that the workbook's ``page`` (a part) links to."""
    links = (HREF.search(tag) for tag in LINK.findall(message.text(page)) if STYLESHEET.search(tag))
    sheets = (message.find(html.unescape(link.group(1)), page) for link in links if link)
    return "".join(message.text(part) for part in sheets if part is not None and part.get_content_type() == "text/css")


def pictures(message, listed):
    """The picture parts that the pages' ``<img>`` elements show (those of the sheets' pages ``listed`` too): a
    picture's VML twin, in a conditional comment, is left out, as LibreOffice's HTML import leaves it."""
    pages = [message.root] + [message.find(source) for _, source in listed if source]
    found = set()
    for page in filter(None, pages):
        for tag in IMAGE.finditer(COMMENT.sub("", message.text(page))):
            part = message.find(_link(tag), page)
            if part is not None and part.get_content_maintype() == "image":
                found.add(_location(part))
    return found


def gather(office, document, archive, import_filter, props):
    """The workbook of ``archive``: a new document holding ``document`` (its first sheet's page, loaded) and each of
    its other sheets' pages, in the workbook's order, named as the workbook names them. A loaded page is read-only
    and keeps the names Calc gave it; the new document is not. ``office.load`` loads a page with the
    ``import_filter`` detection chose for the first; ``props`` makes a MediaDescriptor."""
    book = office.desktop.loadComponentFromURL("private:factory/scalc", "_blank", 0, props(Hidden=True))
    sheets = book.getSheets()
    blank = sheets.getElementNames()
    pages = [document] + [office.load(page, import_filter) for page in archive.sheets]
    own = []  # the name Calc gave each page's sheet, which the new document may have had to change
    for page in pages:
        if page is not None and page.getSheets().getCount():
            own.append(page.getSheets().getElementNames()[0])
            sheets.importSheet(page, own[-1], sheets.getCount())
        if page is not None and page is not document:
            page.close(True)
    for name in blank:
        sheets.removeByName(name)
    names = archive.names if archive.names else own
    if sheets.getCount() == len(names) and len(set(names)) == len(names):
        for index, name in enumerate(names):
            if name and not sheets.hasByName(name):
                sheets.getByIndex(index).setName(name)
    _properties_to(book, document)
    return book


def _properties_to(book, document):
    """Give ``book`` the document properties Calc read of the page ``document``: its title, author and the like, and
    those it made of the page's ``<meta>`` names (``ProgId``, ...), which a plain ``soffice`` keeps."""
    theirs, mine = document.getDocumentProperties(), book.getDocumentProperties()
    for name in PROPERTIES:
        try:
            setattr(mine, name, getattr(theirs, name))
        except Exception:  # a property this LibreOffice does not have, or will not take
            pass
    given, taken = theirs.getUserDefinedProperties(), mine.getUserDefinedProperties()
    for found in given.getPropertySetInfo().getProperties():
        try:
            taken.addProperty(found.Name, REMOVABLE, given.getPropertyValue(found.Name))
        except Exception:  # already there, or of a type it will not take
            pass


def _inlined(message):
    """The page's bytes, each ``<img>`` that shows a picture of the archive given it as a ``data:`` URL: LibreOffice's
    HTML import links a picture it finds as a file, and the result would link to the sandbox's scratch space."""
    page = (message.root.get_payload(decode=True) or b"").decode("latin-1")  # every byte kept, the links are ASCII

    def inline(tag):
        part = message.find(_link(tag))
        if part is None or part.get_content_maintype() != "image":
            return tag.group(0)
        data = base64.b64encode(part.get_payload(decode=True) or b"").decode()
        return f'{tag.group(1)}"data:{part.get_content_type()};base64,{data}"'

    return IMAGE.sub(inline, page).encode("latin-1")


def _root(message, parts):
    """The page: the part the message's ``start`` parameter names (RFC 2557), else its first part; None unless it
    is HTML."""
    start = email.utils.collapse_rfc2231_value(message.get_param("start") or "").strip("<>")
    root = next((part for part in parts if start and (part.get("Content-ID") or "").strip("<>") == start), None)
    root = root or (parts[0] if parts else None)
    return root if root is not None and root.get_content_type() in ("text/html", "application/xhtml+xml") else None


def _location(part):
    return (part.get("Content-Location") or "").strip()


def _relative(location, base):
    """The folders and file name, made safe, of ``location`` below ``base``; None for one outside it."""
    if not location or not base or not location.startswith(base):
        return None
    names = [urllib.parse.unquote(name) for name in location[len(base):].split("?")[0].split("/")]
    if not names or len(names) > MAX_DEPTH + 1 or any(name in ("", ".", "..") for name in names):
        return None
    return [UNSAFE.sub("_", name)[:100] for name in names]


def sheet_list(page):
    """(name, the page's link to its own page) of each sheet the workbook's XML island lists; the link is "" where
    the sheet is in the page itself."""
    found = []
    for sheet in SHEET.findall(page):
        name = NAME.search(sheet)
        source = SOURCE.search(sheet)
        found.append((html.unescape(name.group(1).strip()) if name else "", source.group(1) if source else ""))
    return found


def _link(tag):
    """The ``src`` of an ``IMAGE`` match, its character references resolved."""
    return html.unescape("".join(value or "" for value in tag.groups()[1:]))
