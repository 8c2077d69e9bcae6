"""Every master of a presentation given a theme of its own, before a presentation whose export crashed is stored again.

LibreOffice 25.2's PPTX export writes one master of each set it finds alike (``FindEquivalentMasterPages``: the same
page properties and the same theme object; the masters' shapes, all on the background layer, are not compared), and
a slide that shows its master's footer, slide number or date refers to that master's placeholder by an index given
only to the masters it writes. A slide on any other master of the set makes it read past the end of that map, and
LibreOffice crashes. A .ppt's masters share one theme object once loaded: a deck PowerPoint saved with twelve title
masters, its slide on the eighth, crashed a plain ``soffice --convert-to`` and docshift alike (unseen set 10).

Once a file's export crashed, the retry gives each master a theme object of its own, made from the same values
(``ThemeUnoRepresentation``, which the page copies into a new theme when set), so that no two masters are alike to
the export: it writes every master, each slide stays on its own, and none refers to a placeholder it did not write.
The result then holds as many masters as the source. Run by the bridge under LibreOffice's Python.
"""

import uno

THEME = "ThemeUnoRepresentation"


def separate(document):
    """Give every master of ``document`` a theme object of its own, equal to the one it had; how many were given
    one (none where the document has a single master, or its masters have no theme)."""
    masters = document.getMasterPages()
    if masters.getCount() < 2:
        return 0
    given = 0
    for n in range(masters.getCount()):
        master = masters.getByIndex(n)
        if not master.getPropertySetInfo().hasPropertyByName(THEME):
            continue
        theme = master.getPropertyValue(THEME)
        if not theme:
            continue
        try:  # typed, as the page's setter takes it: a new theme object made from these values
            uno.invoke(master, "setPropertyValue", (THEME, uno.Any("[]com.sun.star.beans.PropertyValue", theme)))
        except Exception:  # a theme this LibreOffice cannot copy: that master stays as it was, the store goes on
            continue
        given += 1
    return given
