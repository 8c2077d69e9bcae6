"""A sheet's page that Excel saved as HTML (in a web archive: ``webarchive.py``), made ready for Calc's HTML import,
and what its sheet is to be given once it loaded (``excelsheet.py`` gives it). Run under LibreOffice's Python,
inside the sandbox.

Calc's import reads the page's table as the sheet, but not as Excel wrote it for itself:

- The drawings written for browsers without VML (pictures, and charts and text boxes as pictures) stand in
  absolutely placed spans, often laid out by tables of their own, which Calc makes cells of the sheet: every cell
  below and right of one moves. They are taken out, and each ``<img>`` with them, as Calc keeps no picture of a page;
  ``read`` tells where each stood, and ``excelsheet.place`` puts it on the sheet, anchored to its cell.
- A row that stands for several empty rows (``mso-xlrowspan``) is one row to Calc: it is written as that many.
- A cell's text is its value as its format shows it; Excel adds the value itself (``x:num``) where the text does not
  give it back, and keeps the format in the cell's class (``mso-number-format``). Calc reads the text, as an
  American's input: 33.3% stays text, 03/07/2005 is 7 March. A cell's ``x:num`` goes in as Calc's own ``sdval``; a
  cell with a format and no value, and one Excel marks text (``x:str``), go in as text; and once the page loaded,
  ``excelsheet.number_formats_to`` gives each cell its format and reads such a text as its format does.
"""

import html
import re
from dataclasses import dataclass
from html.parser import HTMLParser

# what Excel writes for a browser without VML: each drawing (picture, chart, text box) as a picture in an absolutely
# placed span, often in a table that lays several out; Calc's HTML import would make that table cells of the sheet
NO_VML = re.compile(r"<!\[if !vml\]>.*?<!\[endif\]>", re.IGNORECASE | re.DOTALL)
IMAGE_TAG = re.compile(r"<img\b[^>]*>", re.IGNORECASE)
MARGIN = re.compile(r"margin-(left|top)\s*:\s*(-?[0-9]+(?:\.[0-9]+)?)px", re.IGNORECASE)
# a row of the page that stands for as many empty rows of the sheet (Excel's own mark, which Calc does not read)
ROWS = re.compile(r"mso-xlrowspan\s*:\s*(\d+)", re.IGNORECASE)
EMPTY_ROWS = re.compile(r"<tr\b[^>]*?mso-xlrowspan\s*:\s*(\d+)[^>]*>.*?</tr>", re.IGNORECASE | re.DOTALL)
HEIGHT = re.compile(r"(height\s*[=:]\s*['\"]?)([0-9]+(?:\.[0-9]+)?)", re.IGNORECASE)
# a cell's comment: a mark ("[1]") in the cell and a list after the table, both for browsers without annotations;
# each comment's cell in its VML note (x:Row, x:Column, counted from 0) and its text in the shape's div
NO_ANNOTATIONS = re.compile(r"<!\[if !supportAnnotations\]>.*?<!\[endif\]>", re.IGNORECASE | re.DOTALL)
COMMENT_LIST = re.compile(r"<div\b[^>]*mso-element:\s*comment-list.*?(?=</body>|\Z)", re.IGNORECASE | re.DOTALL)
NOTE = re.compile(r"<x:ClientData\b[^>]*ObjectType=[\"']?Note[^>]*>((?:(?!</x:ClientData>).)*)</x:ClientData>"
                  r"((?:(?!<x:ClientData\b).)*?)<div\b[^>]*class=[\"']?shape\b[^>]*>(.*?)</div>",
                  re.IGNORECASE | re.DOTALL)
NOTE_ROW = re.compile(r"<x:Row>\s*(\d+)\s*</x:Row>", re.IGNORECASE)
NOTE_COLUMN = re.compile(r"<x:Column>\s*(\d+)\s*</x:Column>", re.IGNORECASE)
LINE_BREAK = re.compile(r"<br\b[^>]*>", re.IGNORECASE)
TAG = re.compile(r"<[^>]*>")
MAX_NOTES = 10000  # comments of a page, at most
MAX_ROWS = 65536  # rows of an Excel 97-2003 sheet: no page gains more rows than that
MAX_COLUMNS = 256  # its columns: no cell is taken to span more columns, or rows, than that
MAX_TAKEN = 1 << 20  # cells that earlier rows' cells span, at most, that a page's grid keeps track of
MAX_FORMATTED = 1 << 18  # cells of a page given their number format, at most


@dataclass
class Placed:
    """A picture of a workbook's page: the sheet (its index in the workbook) and the cell of the page's table it
    stands in, its offset from that cell's top left corner and its size, in CSS pixels; ``path``: its file."""
    sheet: int
    row: int
    column: int
    left: float
    top: float
    width: int
    height: int
    path: str


class _Grid:
    """Where the cells of an HTML table fall, as Calc's import lays them out: a cell spanning columns or rows takes
    them all, and the next cell of a row takes the next column free. A table inside a cell lays out drawings, and
    keeps its columns' widths and rows' heights."""

    def __init__(self):
        self.row, self.column, self.taken, self.next = -1, 0, set(), 0
        self.widths, self.heights = {}, {}

    def start_row(self, rows):
        """A new row of the page, standing for ``rows`` rows of the sheet."""
        self.row, self.column = self.next, 0
        self.next = self.row + rows

    def cell(self, columns, rows, width, height):
        column = self.column
        while (self.row, column) in self.taken:
            column += 1
        columns, rows = min(columns, MAX_COLUMNS), min(rows, MAX_COLUMNS)
        if len(self.taken) < MAX_TAKEN:  # the rows below that a cell spans: a page of huge spans is placed roughly
            self.taken.update((row, at) for row in range(self.row + 1, self.row + rows)
                              for at in range(column, column + columns))
        self.column = column + columns
        if width:
            self.widths.setdefault(column, width)
        if height:
            self.heights[self.row] = max(self.heights.get(self.row, 0), height)
        return self.row, column


class _Page(HTMLParser):
    """A workbook's page read: its ``<img>`` elements (``found``), each with the cell of the page's outermost table it
    stands in and its offset there (the margins of the absolutely placed spans around it and its place in a table
    that lays out drawings); and its cells' number formats (``formatted``: row, column, format code, whether the
    cell gives its value in x:num), by ``formats`` (class -> code). What a conditional comment holds (VML) is a
    comment to this parser, and is left out."""

    def __init__(self, formats):
        super().__init__(convert_charrefs=True)
        self.grids, self.cells, self.spans, self.found = [], [], [], []
        self.formats, self.formatted, self.extra = formats, [], MAX_ROWS

    def handle_starttag(self, tag, attrs):
        values = dict(attrs)

        def number(name):
            try:
                return max(0, int(float(values.get(name) or 0)))
            except ValueError:
                return 0

        if tag == "table":
            self.grids.append(_Grid())
            self.cells.append(None)
        elif tag == "tr" and self.grids:
            spanned = ROWS.search(values.get("style") or "")
            rows = max(1, min(int(spanned.group(1)), self.extra)) if spanned else 1
            self.extra -= rows - 1  # as ``for_calc`` writes them out: no more than MAX_ROWS rows added to a page
            self.grids[-1].start_row(rows)
        elif tag in ("td", "th") and self.grids and self.grids[-1].row >= 0:
            self.cells[-1] = self.grids[-1].cell(max(1, number("colspan")), max(1, number("rowspan")),
                                                 number("width"), number("height"))
            code = _cell_format(values.get("style") or "", values.get("class") or "", self.formats)
            if code and self.cells[0] is not None and len(self.formatted) < MAX_FORMATTED:
                # a cell of a table inside a cell (Excel puts a cell's text beside a drawing in one) is that cell
                self.formatted.append((*self.cells[0], code, "x:num" in values))
        elif tag == "span":
            style = values.get("style") or ""
            margins = {side.lower(): float(size) for side, size in MARGIN.findall(style)} \
                if "absolute" in style.lower() else {}
            self.spans.append((margins.get("left", 0.0), margins.get("top", 0.0)))
        elif tag == "img" and self.cells and self.cells[0] is not None:
            left, top = sum(span[0] for span in self.spans), sum(span[1] for span in self.spans)
            if len(self.grids) > 1 and self.cells[-1] is not None:
                grid, (row, column) = self.grids[-1], self.cells[-1]
                left += sum(width for at, width in grid.widths.items() if at < column)
                top += sum(height for at, height in grid.heights.items() if at < row)
            self.found.append((*self.cells[0], left, top, number("width"), number("height"), values.get("src") or ""))

    def handle_endtag(self, tag):
        if tag == "table" and self.grids:
            self.grids.pop()
            self.cells.pop()
        elif tag == "span" and self.spans:
            self.spans.pop()


# a cell's start tag, quoted values (a formula's ">" in x:fmla) kept whole; an attribute of it
CELL = re.compile(r"<td\b((?:[^>\"']|\"[^\"]*\"|'[^']*')*)>", re.IGNORECASE)
NUMBER = re.compile(r"\bx:num\s*=\s*(?:\"([^\"]*)\"|'([^']*)'|([^\s>]+))", re.IGNORECASE)
TEXT_CELL = re.compile(r"\bx:str\b", re.IGNORECASE)
BARE_NUMBER = re.compile(r"\bx:num\b(?!\s*=)", re.IGNORECASE)
CLASS = re.compile(r"\bclass\s*=\s*(?:\"([^\"]*)\"|'([^']*)'|([^\s>]+))", re.IGNORECASE)
INLINE = re.compile(r"\bstyle\s*=\s*(?:\"([^\"]*)\"|'([^']*)')", re.IGNORECASE)
OWN_VALUE = re.compile(r"\bsd(?:val|num)\s*=", re.IGNORECASE)
STYLE_BLOCK = re.compile(r"<style\b[^>]*>(.*?)</style>", re.IGNORECASE | re.DOTALL)
RULE = re.compile(r"([^{}]+)\{([^{}]*)\}")
FORMAT = re.compile(r"mso-number-format\s*:\s*(\"(?:[^\"\\]|\\.)*\"|'(?:[^'\\]|\\.)*'|[^;}\"']+)", re.IGNORECASE)
# a CSS escape as Excel writes one in a number format: four hex digits at most, as in \0022Average (a quote, then
# "Average"), where CSS would read the five digits 0022A
CSS_ESCAPE = re.compile(r"\\(?:([0-9A-Fa-f]{1,4})\s?|(.))", re.DOTALL)
# Excel's named formats, as LibreOffice writes them in English; "General" is none
NAMED = {"general": "", "general number": "", "general date": "M/D/YYYY H:MM", "long date": "NNNNMMMM D, YYYY",
         "medium date": "DD-MMM-YY", "short date": "M/D/YYYY", "long time": "H:MM:SS AM/PM",
         "medium time": "H:MM AM/PM", "short time": "HH:MM", "fixed": "0.00", "standard": "#,##0.00",
         "percent": "0.00%", "scientific": "0.00E+00", "currency": "$#,##0.00"}


def number_formats(css):
    """Each class of the style sheet ``css`` that gives a number format -> the format (its CSS escapes resolved)."""
    found = {}
    for selectors, body in RULE.findall(css):
        given = FORMAT.search(body)
        if given:
            for selector in selectors.split(","):
                name = re.search(r"\.([A-Za-z0-9_-]+)\s*$", selector.strip())
                if name:
                    found[name.group(1).lower()] = _format(given.group(1))
    return found


def _format(value):
    value = value.strip()
    if len(value) >= 2 and value[0] == value[-1] and value[0] in "\"'":
        value = value[1:-1]
    value = CSS_ESCAPE.sub(_unescaped, value)
    return NAMED.get(value.strip().lower(), value)


def _unescaped(found):
    """A CSS escape's character: U+FFFD for a code point there is none of (CSS Syntax 4.3.7), as no format holds."""
    if not found.group(1):
        return found.group(2)
    code = int(found.group(1), 16)
    return chr(code) if 0 < code <= 0x10FFFF and not 0xD800 <= code <= 0xDFFF else "\ufffd"


def _cell_format(style, classes, formats):
    """The number format code of a cell of inline ``style`` and ``classes`` (its class attribute); None for none."""
    inline = FORMAT.search(style)
    if inline:
        return _format(inline.group(1)) or None
    return next((formats[name] for name in classes.lower().split() if name in formats), None) or None


def _values(text, formats):
    """The page ``text`` with each cell's stored value, or its being a text, said in Calc's own attributes."""

    def given(attributes, pattern):
        found = pattern.search(attributes)
        return next((value for value in found.groups() if value is not None), "") if found else None

    def cell(match):
        attributes = match.group(1)
        if OWN_VALUE.search(attributes):
            return match.group(0)
        shown = _cell_format(given(attributes, INLINE) or "", given(attributes, CLASS) or "", formats)
        value = given(attributes, NUMBER)
        added = ""
        if value is None and BARE_NUMBER.search(attributes) and shown != "@":
            return match.group(0)  # an x:num with no value: the text is the number, as Calc reads it
        if shown == "@" or (value is None and (shown or TEXT_CELL.search(attributes))):
            # a text (Calc would read 00123 as a number), or a value as its format shows it, which Calc would read
            # as it reads an American's input: ``excelsheet`` reads it as its format does
            added = ' sdnum="1033;0;@"'
        elif value:
            try:
                number = float(value)
            except ValueError:
                number = None
            if number is not None and number == number and abs(number) != float("inf"):
                # Calc's import takes a value with a format only, and finds only the formats it has built in: its
                # own format is given it after the page loads (``excelsheet``)
                added = f' sdval="{number!r}" sdnum="1033;0;General"'
        return f"<td{attributes}{added}>" if added else match.group(0)

    return CELL.sub(cell, text)


def formats_of(text, css=""):
    """Each class -> its number format, of the page ``text``'s own style blocks and the style sheets ``css`` it
    links to."""
    return number_formats(css + "".join(STYLE_BLOCK.findall(text)))


def for_calc(page, formats):
    """The sheet's ``page`` (bytes) as Calc is to import it (the module's docstring says what changes); ``formats``:
    its classes' number formats (``formats_of``)."""
    text = page.decode("latin-1")  # every byte kept: the markup is ASCII, and what is added is too
    left = [MAX_ROWS]

    def rows(match):
        if "<tr" in match.group(0)[3:].lower():  # a row left unclosed: not Excel's, left as it is
            return match.group(0)
        count = max(1, min(int(match.group(1)), left[0]))
        left[0] -= count - 1
        row = HEIGHT.sub(lambda height: f"{height.group(1)}{float(height.group(2)) / count:g}", match.group(0))
        return row * count

    text = COMMENT_LIST.sub("", NO_ANNOTATIONS.sub("", text))  # ``excelsheet.notes_to`` makes them comments
    text = EMPTY_ROWS.sub(rows, IMAGE_TAG.sub("", NO_VML.sub("", text)))
    return _values(text, formats).encode("latin-1")


def read(text, formats):
    """What the page ``text`` places where: (row, column, left, top, width, height, src) of each ``<img>`` (the cell
    of the page's table it stands in, its offset there and size in CSS pixels); (row, column, format code, whether
    the value is given) of each cell with a number format, by its classes' ``formats`` (``formats_of``); and (row,
    column, text) of each cell's comment."""
    reader = _Page(formats)
    reader.feed(text)
    return reader.found, reader.formatted, notes(text)


def notes(text):
    """(row, column, text) of each comment of the page ``text``: its cell as its VML note names it, its text as the
    page shows it, a line a line."""
    found = []
    for note, _, shown in NOTE.findall(text)[:MAX_NOTES]:
        row, column = NOTE_ROW.search(note), NOTE_COLUMN.search(note)
        lines = (html.unescape(TAG.sub("", line)) for line in LINE_BREAK.split(shown))
        said = "\n".join(" ".join(line.split()) for line in lines).strip()
        if row and column and said:
            found.append((int(row.group(1)), int(column.group(1)), said))
    return found
