"""The shadowed text of a loaded presentation, for the worker to write into the result (``text_shadows.py``).

LibreOffice 25.2 loads a .ppt's text shadow (``CharShadowed``, from a run's own formatting or its master's style)
and its PPTX export writes every run an empty ``a:effectLst``: the shadow is lost, and the empty list also keeps the
run from any effect a style would give it. The worker cannot tell from the result which runs had one; it asks this
child, which holds the document as LibreOffice loaded it. Run by the bridge under LibreOffice's Python.

A shape's whole text is read through one cursor first: its state says whether every character has the same value.
Only a shape whose text mixes shadowed and plain characters is walked paragraph by paragraph, portion by portion.
"""

import hashlib

from com.sun.star.beans.PropertyState import AMBIGUOUS_VALUE

GROUP = "com.sun.star.drawing.GroupShape"
SHADOWED = "CharShadowed"
# past this many shapes and text portions read, the walk stops and says what it found so far (and that it stopped)
WALK_LIMIT = 20000


def shadowed(document):
    """``{"pages": [[kind, index, shapes]], "complete": bool}``: for each slide ("slide") and master ("master") with
    shadowed text, its index among its kind and its shapes with any: ``[ordinal, digest, portions]``, the shape's place
    among the page's shapes with text (a group's inside it where it stands; a table's cells are not read), the
    ``digest`` of its text's visible characters, and ``True`` (all of it shadowed) or its portions in order, as
    ``[visible characters, shadowed]`` (neighbours alike joined). ``complete`` is False past ``WALK_LIMIT`` shapes and
    portions. The text itself is not sent: a deck's whole text would be more than an answer may hold."""
    budget = [WALK_LIMIT]
    found = []
    for kind, pages in (("slide", document.getDrawPages()), ("master", document.getMasterPages())):
        for index in range(pages.getCount()):
            shapes = []
            whole = _walk(pages.getByIndex(index), shapes, budget, [0])
            if shapes:
                found.append([kind, index, shapes])
            if not whole:
                return {"pages": found, "complete": False}
    return {"pages": found, "complete": True}


def digest(visible):
    """What stands for a shape's visible characters (its text without whitespace) in the answer; the worker makes
    the same of the result's (``text_shadows.digest``)."""
    return hashlib.sha1(visible.encode("utf-8", "surrogatepass")).hexdigest()[:16]


def _walk(group, shapes, budget, ordinal):
    """Add the shadowed shapes of ``group`` (a page or a group shape) to ``shapes``, counting those with text in
    ``ordinal``; False once over budget."""
    for index in range(group.getCount()):
        budget[0] -= 1
        if budget[0] < 0:
            return False
        shape = group.getByIndex(index)
        if shape.getShapeType() == GROUP:
            if not _walk(shape, shapes, budget, ordinal):
                return False
        elif hasattr(shape, "createTextCursor"):  # a table shape has none: its text is its cells'
            entry = _shape(shape, budget)
            if entry is not None:
                ordinal[0] += 1
                if entry[1] is not False:
                    shapes.append([ordinal[0] - 1, *entry])
    return budget[0] >= 0


def _shape(shape, budget):
    """``[digest, portions]`` of a shape with text (``portions`` False where none is shadowed), None without
    text."""
    cursor = shape.createTextCursor()
    cursor.gotoEnd(True)
    visible = "".join(cursor.getString().split())
    if not visible:
        return None
    if cursor.getPropertyState(SHADOWED) != AMBIGUOUS_VALUE:
        return [digest(visible), bool(cursor.getPropertyValue(SHADOWED))]
    portions = []  # [visible characters, shadowed] of the shape's portions in order, neighbours alike joined
    paragraphs = shape.getText().createEnumeration()
    while paragraphs.hasMoreElements() and budget[0] >= 0:
        each = paragraphs.nextElement().createEnumeration()
        while each.hasMoreElements() and budget[0] >= 0:
            budget[0] -= 1
            portion = each.nextElement()
            count = len("".join(portion.getString().split()))
            shadow = bool(portion.getPropertyValue(SHADOWED)) if count else None
            if shadow is None:
                continue
            if portions and portions[-1][1] == shadow:
                portions[-1][0] += count
            else:
                portions.append([count, shadow])
    if budget[0] < 0:
        return None
    # mixed only where no character shows: an empty paragraph's mark, a direction mark (3 corpus decks)
    return [digest(visible), portions if any(shadow for _, shadow in portions) else False]
