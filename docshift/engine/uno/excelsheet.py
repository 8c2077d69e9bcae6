"""What a workbook's sheets are given once Excel's pages of them loaded in Calc (``excelpage.py`` read the pages and
made them ready): each picture on its cell, each cell's number format, and each cell's comment. Run under
LibreOffice's Python, inside the sandbox, on the writable workbook ``webarchive.gather`` made."""

import re
import urllib.parse

PIXEL = 2540 / 96  # a CSS pixel in hundredths of a millimetre
SHEET_ROWS, SHEET_COLUMNS = 1 << 20, 1 << 14  # a Calc sheet's: a cell past them is left out
MAX_PIXELS = 1 << 20  # a picture's offset or size, past which it is out of any sheet's reach (Calc's are 32-bit)
DAY_MONTH = re.compile(r"^(\d{1,2})([./-])(\d{1,2})(?=[./-]|$)")


def notes_to(document, noted, make):
    """Give each cell of ``noted`` (sheet, row, column, text) of ``document`` its comment. Returns how many."""
    sheets, count = document.getSheets(), 0
    for sheet, row, column, said in noted:
        if sheet >= sheets.getCount() or row >= SHEET_ROWS or column >= SHEET_COLUMNS:
            continue
        where = make("com.sun.star.table.CellAddress", Sheet=sheet, Column=column, Row=row)
        sheets.getByIndex(sheet).getAnnotations().insertNew(where, said)
        count += 1
    return count


def number_formats_to(document, formatted, make, create):
    """Give each cell of ``formatted`` (sheet, row, column, format code, whether its value is given) of ``document``
    its number format, a code LibreOffice reads as it reads Excel's in English. A cell whose value the page gives
    keeps it. One whose text is its value as the format shows it (10%, 23/02/2005: Excel gives no value where its
    text gives it back) is read by the format, and takes the value only if the format shows it as the same text;
    else a plain number is read as Calc would have read it, and anything else stays text. ``make`` makes a UNO
    struct, ``create`` a service. Returns how many cells were given a format."""
    numbers, sheets = document.getNumberFormats(), document.getSheets()
    reader = create("com.sun.star.util.NumberFormatter")
    reader.attachNumberFormatsSupplier(document)
    keys, count = {}, 0
    runs = {}  # (sheet, column, key) -> rows of the cells that take the format alone: given a range at a time
    for sheet, row, column, code, given in formatted:
        if code not in keys:
            keys[code] = _key(numbers, code, make)
        if sheet >= sheets.getCount() or row >= SHEET_ROWS or column >= SHEET_COLUMNS:
            continue
        key = keys[code]
        if given or code == "@":
            if key is not None:
                runs.setdefault((sheet, column, key), []).append(row)
            continue
        cell = sheets.getByIndex(sheet).getCellByPosition(column, row)
        text = cell.getString()
        value = _shown(reader, key, text, code) if key is not None else None
        if value is None:  # no number in this format: a plain one, in none
            plain = _plain(reader, text)
            key, value = (0, plain) if plain is not None else (key, None)
        if key is not None:
            cell.NumberFormat = key
            count += 1
        if value is not None:
            cell.setValue(value)
    for (sheet, column, key), rows in runs.items():
        rows = sorted(set(rows))
        for first, last in _runs(rows):  # a column's cells one after another: one call (a page has thousands)
            sheets.getByIndex(sheet).getCellRangeByPosition(column, first, column, last).NumberFormat = key
        count += len(rows)
    return count


def _runs(rows):
    """(first, last) of each run of consecutive numbers of the sorted ``rows``."""
    found = []
    for row in rows:
        if found and row == found[-1][1] + 1:
            found[-1][1] = row
        else:
            found.append([row, row])
    return [tuple(run) for run in found]


def _key(numbers, code, make):
    """The key of the format ``code`` (read in English, as written) in ``numbers``, a document's formats, added when it
    is new; None when LibreOffice cannot read it."""
    english = make("com.sun.star.lang.Locale", Language="en", Country="US")
    # Excel's "[$-F400]" and "[$-F800]" say "the reader's system's time or long date format", which LibreOffice
    # shows its own way; what follows them is the format as the page shows it, and is tried first
    for tried in dict.fromkeys((re.sub(r"^\[\$-F[48]00\]", "", code, flags=re.IGNORECASE), code)):
        key = numbers.queryKey(tried, english, False)
        if key != -1:
            return key
        try:
            return numbers.addNew(tried, english)
        except Exception:  # MalformedNumberFormatException: a code LibreOffice cannot read
            continue
    return None


def _same(shown, text):
    return " ".join(shown.replace("\xa0", " ").split()) == " ".join(text.replace("\xa0", " ").split())


def _shown(reader, key, text, code):
    """The value that ``text`` shows in the format ``key`` (of ``code``), if the format shows it as ``text`` again;
    else None. LibreOffice reads a date month first, as an American does: a format that puts the day first is
    tried with the text's first two numbers the other way round too, and the format's showing decides."""
    bare = re.sub(r'"[^"]*"|\[[^\]]*\]|\\.', "", code).lower()
    tries = [text.strip()]
    if "d" in bare and "m" in bare and bare.index("d") < bare.index("m"):
        tries.append(DAY_MONTH.sub(r"\3\2\1", text.strip(), count=1))
    for given in tries:
        try:
            value = reader.convertStringToNumber(key, given)
        except Exception:  # NotNumericException: no number in this format
            continue
        if _same(reader.convertNumberToString(key, value), text):
            return value
    return None


def _plain(reader, text):
    """``text`` read as a plain number (the General format), as Calc's import reads a cell; None for no number."""
    try:
        return reader.convertStringToNumber(0, text.strip())
    except Exception:  # NotNumericException
        return None


def place(document, placed, graphic, make):
    """Put each :class:`excelpage.Placed` picture of ``placed`` on its sheet of ``document`` (a writable workbook),
    anchored to its cell; ``graphic(url)`` loads a picture's file, ``make(type, **values)`` makes a UNO struct. A
    picture placed or sized past a sheet's reach (a damaged page) is left out, and the report counts it missing.
    Returns how many."""
    sheets, count = document.getSheets(), 0
    for picture in placed:
        if picture.sheet >= sheets.getCount() or picture.row >= SHEET_ROWS or picture.column >= SHEET_COLUMNS or \
                max(abs(picture.left), abs(picture.top), picture.width, picture.height) > MAX_PIXELS:
            continue
        sheet = sheets.getByIndex(picture.sheet)
        loaded = graphic("file://" + urllib.parse.quote(picture.path))
        if loaded is None:  # no picture LibreOffice can read: the report counts it missing
            continue
        shape = document.createInstance("com.sun.star.drawing.GraphicObjectShape")
        shape.Graphic = loaded
        sheet.getDrawPage().add(shape)
        cell = sheet.getCellByPosition(picture.column, picture.row)
        shape.Anchor = cell
        corner = cell.Position
        shape.Position = make("com.sun.star.awt.Point", X=corner.X + round(picture.left * PIXEL),
                              Y=corner.Y + round(picture.top * PIXEL))
        width, height = picture.width, picture.height
        if not (width and height):  # the page gives no size: the picture's own
            width, height = loaded.SizePixel.Width, loaded.SizePixel.Height
        shape.Size = make("com.sun.star.awt.Size", Width=round(width * PIXEL), Height=round(height * PIXEL))
        count += 1
    return count
