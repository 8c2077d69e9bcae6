"""The shadowed text of a loaded presentation, for the worker to write into the result (``text_shadows.py``).

LibreOffice 25.2 loads a .ppt's text shadow (``CharShadowed``, from a run's own formatting or its master's style)
and its PPTX export writes every run an empty ``a:effectLst``: the shadow is lost, and the empty list also keeps the
run from any effect a style would give it. The worker cannot tell from the result which runs had one; it asks this
child, which holds the document as LibreOffice loaded it. Run by the bridge under LibreOffice's Python.

A shape's whole text is read through one cursor first: its state says whether every character has the same value.
Only a shape whose text mixes shadowed and plain characters is walked paragraph by paragraph, portion by portion.
"""

from com.sun.star.beans.PropertyState import AMBIGUOUS_VALUE

GROUP = "com.sun.star.drawing.GroupShape"
SHADOWED = "CharShadowed"
# past this many shapes on the slides and masters, the walk stops and says what it found so far (and that it stopped)
SHAPE_LIMIT = 5000


def shadowed(document):
    """``{"pages": [[kind, index, shapes]], "complete": bool, "masters": int}``: for each slide ("slide") and
    master ("master") with shadowed text, its index among its kind and its shapes with any: ``[ordinal, text,
    portions]``, the shape's place among the page's shapes with text (a group's inside it where it stands; a
    table's cells are not read), its whole text, and ``True`` (all of it shadowed) or its text's portions in order,
    as ``[text, shadowed]`` (neighbours alike joined, and whitespace with its neighbour). ``complete`` is False past
    ``SHAPE_LIMIT`` shapes; ``masters`` counts the masters."""
    budget = [SHAPE_LIMIT]
    found = []
    masters = document.getMasterPages()
    for kind, pages in (("slide", document.getDrawPages()), ("master", masters)):
        for index in range(pages.getCount()):
            shapes = []
            if not _walk(pages.getByIndex(index), shapes, budget, [0]):
                return {"pages": found, "complete": False, "masters": masters.getCount()}
            if shapes:
                found.append([kind, index, shapes])
    return {"pages": found, "complete": True, "masters": masters.getCount()}


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
            entry = _shape(shape)
            if entry is not None:
                ordinal[0] += 1
                if entry[1] is not False:
                    shapes.append([ordinal[0] - 1, *entry])
    return True


def _shape(shape):
    """``[text, portions]`` of a shape with text (``portions`` False where none is shadowed), None without text."""
    cursor = shape.createTextCursor()
    cursor.gotoEnd(True)
    text = cursor.getString()
    if not text.strip():
        return None
    if cursor.getPropertyState(SHADOWED) != AMBIGUOUS_VALUE:
        return [text, bool(cursor.getPropertyValue(SHADOWED))]
    portions = []  # [text, shadowed] of the shape's portions, neighbours alike joined, paragraphs run together
    paragraphs = shape.getText().createEnumeration()
    while paragraphs.hasMoreElements():
        each = paragraphs.nextElement().createEnumeration()
        while each.hasMoreElements():
            portion = each.nextElement()
            part, shadow = portion.getString(), bool(portion.getPropertyValue(SHADOWED))
            if portions and (portions[-1][1] == shadow or not part.strip()):
                portions[-1][0] += part
            elif portions and not portions[-1][0].strip():
                portions[-1] = [portions[-1][0] + part, shadow]
            else:
                portions.append([part, shadow])
    # mixed only where no character shows: an empty paragraph's mark, a direction mark (3 corpus decks)
    return [text, portions if any(shadow for part, shadow in portions if part.strip()) else False]
