"""A .doc's fields as its text holds them ([MS-DOC] 2.8.25: 0x13 code 0x14 result 0x15, nested fields too): what a
reader sees of them, and which results are not the document's own words.

Word stores each field's last result in the text. Some results are computed from the moment, the file or the rest
of the document (a date, a file name, a page count, a cross-reference, a condition), and LibreOffice computes them
again when it loads the file: "FieldsTest.doc" becomes the customer's file name, "Error! No bookmark name given."
LibreOffice's own error text, a stored "trueResult" the result of the condition. Those results are no content
that a conversion keeps or loses, so the count of the source's text leaves them out; every other field's result
(a hyperlink's text, a table of contents) is counted, and a lost one is reported.
"""

import re

FIELD_MARKS = re.compile("[\x13\x14\x15]")
KEYWORD = re.compile(r"[ \t]*([A-Za-z]+)")  # a field code's first word: PAGE, of a code "PAGE\* roman"
# the fields whose result LibreOffice computes anew at load, by Word's keywords: dates and times, what the file and
# its properties say, counts and page numbers, references and conditions, sequences
COMPUTED = frozenset({
    "DATE", "TIME", "CREATEDATE", "SAVEDATE", "PRINTDATE", "EDITTIME",
    "FILENAME", "FILESIZE", "TEMPLATE", "INFO", "AUTHOR", "LASTSAVEDBY", "TITLE", "SUBJECT", "KEYWORDS", "COMMENTS",
    "DOCPROPERTY", "USERNAME", "USERINITIALS", "USERADDRESS",
    "NUMCHARS", "NUMWORDS", "NUMPAGES", "PAGE", "SECTION", "SECTIONPAGES", "REVNUM",
    "IF", "REF", "PAGEREF", "NOTEREF", "STYLEREF", "SEQ", "MERGEREC", "MERGESEQ",
})


def visible(text: str, leave_out: frozenset[str] = frozenset()) -> str:
    """``text`` as a reader sees it: without its fields' codes, and without the results of the fields whose keyword
    (the first word of the code) is in ``leave_out``."""
    if "\x13" not in text:
        return text
    kept: list[str] = []
    stack: list[list[bool]] = []  # each open field: [past its separator, its result counted]
    pos = 0
    for mark in FIELD_MARKS.finditer(text):
        if all(past and counted for past, counted in stack):
            kept.append(text[pos:mark.start()])
        char = mark.group()
        if char == "\x13":
            keyword = KEYWORD.match(text, mark.end(), mark.end() + 64)
            stack.append([False, keyword is None or keyword.group(1).upper() not in leave_out])
        elif char == "\x14" and stack:
            stack[-1][0] = True
        elif char == "\x15" and stack:
            stack.pop()
        pos = mark.end()
    if all(past and counted for past, counted in stack):
        kept.append(text[pos:])
    return "".join(kept)
