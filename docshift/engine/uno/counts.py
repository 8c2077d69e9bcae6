"""What a loaded document holds beside its text, sheets and slides, for the worker's no-silent-loss checks: the
embedded objects and charts LibreOffice loaded, and the marks of a text's notes. Run by the bridge (``bridge.py``)
under LibreOffice's Python.
"""

import re
from collections import Counter

OLE_SHAPE = "com.sun.star.drawing.OLE2Shape"
GROUP_SHAPE = "com.sun.star.drawing.GroupShape"
CHART_CLSID = "12dcae26-281f-416f-a234-c3086127382e"  # LibreOffice's chart object
# past this many shapes, the embedded objects are counted from the document's storage names instead
SHAPE_LIMIT = 200
OBJECT_STORAGE = re.compile(r"Object [0-9]+")  # an embedded object's storage in a loaded document


def note_marks(document):
    """The marks of the footnotes and endnotes in the body text, which a .docx writes as elements when numbered (40
    notes' numbers were 71 of a text's 1,461 characters that the check found missing, and it refused the file)."""
    groups = (document.getFootnotes(), document.getEndnotes()) if hasattr(document, "getEndnotes") else ()
    return Counter("".join("".join(group.getByIndex(index).getAnchor().getString().split())
                           for group in groups for index in range(group.getCount())))


def computed(document):
    """The characters LibreOffice computes in a text: its fields' results (a date, a count, a reference) and its
    indexes' entries (a table of contents). It computes them again as it exports, and a result may show them
    otherwise than the source kept them (Word's "Error! No bookmark name given." becomes LibreOffice's "Error:
    Reference source not found"); the worker's text check sets them aside where the text differs. Fields of headers
    and notes are among them too: that only lets more differ, and only where the check would refuse."""
    found = Counter()
    fields = document.getTextFields().createEnumeration()
    while fields.hasMoreElements():
        found.update("".join(fields.nextElement().getPresentation(False).split()))
    indexes = document.getDocumentIndexes()
    for index in range(indexes.getCount()):
        found.update("".join(indexes.getByIndex(index).getAnchor().getString().split()))
    return found


def sheet_parts(document, sheets):
    charts = sum(sheets.getByIndex(index).getCharts().getCount() for index in range(sheets.getCount()))
    pages = [sheets.getByIndex(index).getDrawPage() for index in range(sheets.getCount())]
    # a chart is an OLE shape too: the other OLE shapes are the embedded objects
    objects = ole_shapes(pages, lambda shape, kind: kind == OLE_SHAPE and shape.CLSID.lower() != CHART_CLSID)
    return {"charts": charts,
            "embedded_objects": objects if objects is not None else max(0, object_storages(document) - charts)}


def slide_parts(document, slides):
    """OLE shapes (charts and formulas included, as in a .ppt) on the slides and masters, empty placeholders
    left out."""
    pages = [pages.getByIndex(index) for pages in (slides, document.getMasterPages())
             for index in range(pages.getCount())]
    found = ole_shapes(pages, lambda shape, kind: kind in (OLE_SHAPE, "com.sun.star.presentation.ChartShape") or
                       (kind == "com.sun.star.presentation.OLE2Shape" and not shape.IsEmptyPresentationObject))
    return {"embedded_objects": found if found is not None else object_storages(document)}


def text_parts(document):
    """Charts and formulas are embedded objects of a text document, as in a .doc's ObjectPool."""
    return {"embedded_objects": document.getEmbeddedObjects().getCount()}


def ole_shapes(pages, counts):
    """How many shapes of ``pages`` (inside groups too) ``counts(shape, type)``; None past ``SHAPE_LIMIT`` shapes:
    each costs two calls (a 28 s presentation spent 2.8 s walking all of its own). The pages' own shapes are counted
    first: past the limit there, none is walked (two corpus decks spent 0.3 s each walking 200 only to give up)."""
    sizes = [page.getCount() for page in pages]
    if sum(sizes) > SHAPE_LIMIT:
        return None
    found, budget, pending = 0, SHAPE_LIMIT, list(zip(pages, sizes))
    while pending:
        group, size = pending.pop()
        for index in range(size):
            budget -= 1
            if budget < 0:
                return None
            shape = group.getByIndex(index)
            kind = shape.getShapeType()
            if kind == GROUP_SHAPE:
                pending.append((shape, shape.getCount()))
            elif counts(shape, kind):
                found += 1
    return found


def object_storages(document):
    """The embedded objects of the document as its storage names them, in one call: a floor (an object that
    LibreOffice loads only when it is first used has no storage yet), for documents with too many shapes."""
    return sum(1 for name in document.getDocumentSubStoragesNames() if OBJECT_STORAGE.fullmatch(name))
