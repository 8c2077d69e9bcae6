"""The counts of a .pptx/.pptm, the result of a .ppt."""

from collections import Counter
from typing import cast

from docshift.engine.inventory.common import Inventory, attempt
from docshift.engine.inventory.package import (
    NS_A,
    NS_P,
    NS_R,
    SEP,
    Package,
    charts_and_objects,
    pictures_in,
    pictures_of,
    scan,
)

NS_P188 = "http://schemas.microsoft.com/office/powerpoint/2018/8/main"  # modern comments
A_TEXT = f"{NS_A}{SEP}t"
# a transition's or click's sound (audio) and a sound shape's (audio and, since PowerPoint 2010, media)
LINK_TYPES = ("/hyperlink", "/slide")  # a hyperlink's relationship: to an address or file, to a slide of the deck
SOUND_RELATIONSHIPS = {"http://schemas.openxmlformats.org/officeDocument/2006/relationships/audio",
                       "http://schemas.microsoft.com/office/2007/relationships/media"}


def read(package: Package, inventory: Inventory) -> None:
    """Counts of a .pptx/.pptm: the slide list, slides, their notes and comments, masters and layouts."""
    counts = inventory.counts
    objects = attempt(lambda: sum(charts_and_objects(package, "ppt")))  # charts: MS Graph objects, as in .docx
    main = "ppt/presentation.xml"
    slide_ids: list[str | None] = []

    def slide(tag: str, attributes: dict[str, str]) -> None:
        if tag == f"{NS_P}{SEP}sldId":
            slide_ids.append(attributes.get(f"{NS_R}{SEP}id"))

    package.parse(main, slide)
    relationships = package.relationships(main, required=True)
    # part names: each one the package has
    slides = cast(list[str], [relationships[rid][1] for rid in slide_ids
                              if rid in relationships and relationships[rid][1] in package.names])
    counts["slides"] = len(slides)
    text: Counter[str] = Counter()
    pictures: set[str] = set()
    placeholders: set[str] = set()
    notes, comments, math = 0, 0, 0
    sounds: set[str | None] = set()  # the media parts in the package that a slide's sound relationships name
    cm = (f"{NS_P}{SEP}cm", f"{NS_P188}{SEP}cm")
    links: list[str] = []  # "slide n" once for each distinct hyperlink of the slide
    acting: list[str] = []  # "slide n" once for each click or mouse-over that runs a macro or an object's verb
    for number, name in enumerate(slides, 1):
        part = scan(package, name, (A_TEXT,))
        text.update(part.text)
        math += part.math
        slide_relationships = package.relationships(name)
        acting += [f"slide {number}"] * part.actions
        links += [f"slide {number}"] * sum(slide_relationships.get(rid, ("", None))[0].endswith(LINK_TYPES)
                                           for rid in part.links)
        pictures |= pictures_of(package, name, part, slide_relationships)
        placeholders |= part.placeholders
        sounds |= {target for rel_type, target in slide_relationships.values()
                   if target in package.names and rel_type in SOUND_RELATIONSHIPS}
        for rel_type, target in slide_relationships.values():
            if target and target in package.names and rel_type.endswith("/notesSlide"):
                notes_part = scan(package, target, (A_TEXT,))
                notes += notes_part.note_text
                pictures |= pictures_of(package, target, notes_part)
            elif target and target in package.names and rel_type.endswith("/comments"):
                comments += sum(scan(package, target, count=cm).elements.values())
    inventory.text = text
    counts["characters"] = text.total()
    counts["notes"] = notes
    counts["comments"] = comments
    counts["headers_footers"] = len(placeholders & {"dt", "sldNum", "ftr"})
    counts["sounds"] = len(sounds)
    counts["hyperlinks"], inventory.where["hyperlinks"] = len(links), links
    counts["actions"], inventory.where["actions"] = len(acting), acting
    counts["embedded_objects"] = None if objects is None else objects + math
    for name in package.matching(r"ppt/(slideMasters/slideMaster|slideLayouts/slideLayout)[0-9]*\.xml"):
        pictures |= pictures_in(package, name)
    counts["images"] = len(pictures)
