"""A deck's hyperlinks that LibreOffice's property reader cuts off (``ppt_links``): the corpus's 42520.ppt, whose
hyperlink list LibreOffice reads 9 entries of 19, and property streams made here, laid out again only where a
property would be cut."""

import re
import struct
import zipfile

import olefile
import pytest
from conftest import ROOT
from conftest import _soffice_save as soffice

from docshift.engine import convert, inventory, ppt_links

CORPUS = ROOT.parent / "shared" / "corpus"
LINK = "http://dynamiclogic.com/index.php"
FMTID = bytes.fromhex("05d5cdd59c2e1b10939708002b2cf9ae")


def linked_slides(pptx):
    """The numbers of the slides of ``pptx`` that have a hyperlink to ``LINK``."""
    with zipfile.ZipFile(pptx) as package:
        return {int(re.search(r"slide(\d+)\.xml\.rels$", name).group(1)) for name in package.namelist()
                if re.fullmatch(r"ppt/slides/_rels/slide\d+\.xml\.rels", name) and LINK.encode() in package.read(name)}


def hyperlink_list(data):
    """The bytes of the ``_PID_HLINKS`` property (property 2 of the user-defined set) of a summary stream."""
    sets = struct.unpack_from("<I", data, 24)[0]
    offset = next(struct.unpack_from("<I", data, 28 + 20 * index + 16)[0] for index in range(sets)
                  if data[28 + 20 * index:28 + 20 * index + 16] == FMTID)
    properties = dict(struct.unpack_from("<II", data, offset + 8 + 8 * index)
                      for index in range(struct.unpack_from("<I", data, offset + 4)[0]))
    start = offset + properties[2]
    return data[start:start + 8 + struct.unpack_from("<I", data, start + 4)[0]]


def test_a_deck_keeps_every_hyperlink_past_the_cut_of_libreoffices_property_reader(office, tmp_path):
    """Each of the 19 slides of 42520.ppt has a picture linked to the same page; the list of addresses starts 1232
    bytes into its summary stream, so LibreOffice reads 1124 bytes of its 2292: a plain soffice links the first 9
    slides (the ExHyperlinks of the other ten come later in the list). The copy LibreOffice gets links all 19."""
    deck = CORPUS / "ppt" / "42520.ppt"
    before = deck.read_bytes()
    plain = soffice(deck, "pptx", tmp_path / "plain")
    assert linked_slides(plain) == {1, 2, 3, 4, 5, 6, 7, 8, 14}
    converted = convert.convert(office, deck, "ppt", tmp_path / "work", 60)
    assert linked_slides(converted.path) == set(range(1, 20))
    assert converted.fidelity["counts"]["hyperlinks"] == {"source": 19, "result": 19}
    assert converted.fidelity["complete"] is True, converted.fidelity["lost"]
    # the report of the plain result names the ten slides whose link it lost
    plain_report = inventory.report(inventory.of_source(deck, "ppt"), inventory.of_result(plain, "ppt"))
    assert plain_report["counts"]["hyperlinks"] == {"source": 19, "result": 9}
    assert "10 of 19 hyperlinks are missing; missing: slide 9, slide 10, slide 11 and 7 more" in \
        [entry["detail"] for entry in plain_report["lost"]]
    # the customer's file is as it was; the copy LibreOffice read has the same list, its name the file's own
    assert deck.read_bytes() == before
    copy = tmp_path / "work" / "links" / deck.name
    with olefile.OleFileIO(str(copy)) as ole, olefile.OleFileIO(str(deck)) as original:
        assert hyperlink_list(ole.openstream(ppt_links.STREAM).read()) == \
            hyperlink_list(original.openstream(ppt_links.STREAM).read())
        streams = [path for path in original.listdir() if path != [ppt_links.STREAM]]
        assert sorted(ole.listdir()) == sorted(original.listdir())
        for path in streams:  # nothing else of the deck changed
            assert ole.openstream(path).read() == original.openstream(path).read(), path


def animation_steps(pptx, slide):
    """The paragraph each animation step of ``slide`` of ``pptx`` reveals, in order."""
    with zipfile.ZipFile(pptx) as package:
        return re.findall(r'<p:pRg st="(\d+)"', package.read(f"ppt/slides/slide{slide}.xml").decode())


def slide_links(pptx):
    """{slide number: how many hyperlinks to an address its relationships hold}."""
    with zipfile.ZipFile(pptx) as package:
        return {int(re.search(r"slide(\d+)\.xml\.rels$", name).group(1)): package.read(name).count(b"/hyperlink\"")
                for name in package.namelist() if re.fullmatch(r"ppt/slides/_rels/slide\d+\.xml\.rels", name)}


def test_text_links_past_the_cut_on_a_slide_that_animates_stay_as_a_plain_soffice_leaves_them(office, tmp_path):
    """customGeo.ppt has 72 ExHyperlinks, and LibreOffice reads 55 entries of their list. Kept, the 17 others link
    pictures and text on seven slides; but the two in the text of its last slide, whose paragraphs appear one by
    one, would move that slide's animation steps (LibreOffice places them by PowerPoint's characters, and a link
    becomes a field of one). Those two stay unlinked, as in a plain soffice's result, and the steps are the same."""
    deck = CORPUS / "ppt" / "customGeo.ppt"
    with olefile.OleFileIO(str(deck)) as ole:
        assert ppt_links.kept_entries(ole.openstream(ppt_links.STREAM).read()) == 55
    plain = soffice(deck, "pptx", tmp_path / "plain")
    converted = convert.convert(office, deck, "ppt", tmp_path / "work", 60)
    before, after = slide_links(plain), slide_links(converted.path)
    gained = {slide: after[slide] - before.get(slide, 0) for slide in after if after[slide] > before.get(slide, 0)}
    assert set(gained) == {32, 37, 38, 41, 42, 44} and sum(gained.values()) >= 14, gained
    assert all(after[slide] >= count for slide, count in before.items())
    assert after.get(48, 0) == before.get(48, 0) == 0
    assert animation_steps(converted.path, 48) == animation_steps(plain, 48) != []
    # and the report says so
    assert converted.fidelity["counts"]["hyperlinks"] == {"source": 30, "result": 28}
    assert {"what": "hyperlinks", "count": 2, "detail": "2 of 30 hyperlinks are missing; missing: slide 48 (2)"} \
        in converted.fidelity["lost"]


def summary(*sets):
    """A summary stream of ``sets`` [(offset, [(property id, bytes)])]: the header, then each set at its offset."""
    data = bytearray(b"\xfe\xff\x00\x00" + bytes(20) + struct.pack("<I", len(sets)))
    data += b"".join(FMTID + struct.pack("<I", offset) for offset, _ in sets)
    for offset, properties in sets:
        data += bytes(offset - len(data))
        body = bytearray(struct.pack("<II", 0, len(properties)) + bytes(8 * len(properties)))
        for index, (number, value) in enumerate(properties):
            struct.pack_into("<II", body, 8 + 8 * index, number, len(body))
            body += value + bytes(-len(value) % 4)
        struct.pack_into("<I", body, 0, len(body))
        data += body
    return bytes(data)


def blob(size):
    return struct.pack("<II", 0x41, size) + bytes(range(256)) * (size // 256) + bytes(size % 256)


def sets_of(data):
    """[(offset, declared size, {property id: bytes up to the next property or the set's end})] of a stream."""
    found = []
    for index in range(struct.unpack_from("<I", data, 24)[0]):
        offset = struct.unpack_from("<I", data, 28 + 20 * index + 16)[0]
        size, count = struct.unpack_from("<II", data, offset)
        starts = dict(struct.unpack_from("<II", data, offset + 8 + 8 * n) for n in range(count))
        ends = sorted(starts.values()) + [min(size, len(data) - offset)]
        values = {number: data[offset + start:offset + ends[ends.index(start) + 1]]
                  for number, start in starts.items()}
        found.append((offset, size, values))
    return found


def test_a_set_whose_property_would_be_cut_is_padded_as_far_as_its_offset():
    """A set 1,000 bytes into the stream with a 1,208-byte property: LibreOffice would read 224 of its bytes (the
    set's 1,224 bytes less 1,000). Laid out again, that set declares its size plus its offset, the padding after it,
    so that what is cut is the padding; the set before it, read whole, is as it was, and every property has the same
    bytes."""
    first = [(1, struct.pack("<IHH", 2, 1252, 0)), (2, bytes(400)), (3, bytes(400))]
    data = summary((68, first), (1000, [(2, blob(1200))]))
    laid = ppt_links.padded(data)
    assert laid is not None
    before, after = sets_of(data), sets_of(laid)
    for (_, _, was), (_, _, now) in zip(before, after, strict=True):  # the same bytes, the padding after the last
        assert was.keys() == now.keys()
        assert all(now[number] == was[number] + bytes(len(now[number]) - len(was[number])) for number in was)
    assert after[0][:2] == before[0][:2] == (68, 840)
    offset, size, values = after[1]
    assert size == 1224 + offset and len(laid) == offset + size and laid.endswith(bytes(offset))
    for (offset, size, _), (_, _, values) in zip(after, before, strict=True):
        # what LibreOffice reads of each property is whole, and the stream holds it
        assert size - offset >= max(len(value) for value in values.values()) and offset + size <= len(laid)
        assert offset % 4 == 0


@pytest.mark.parametrize("sets", [
    # every property shorter than its set's size less the set's offset
    [(68, [(2, blob(100)), (3, blob(100))]), (400, [(number, blob(100)) for number in range(2, 12)])],
    # a set smaller than its offset: the reader's subtraction wraps, and it cuts nothing
    [(68, [(2, blob(100)), (3, blob(100))]), (2000, [(2, blob(200))])],
    # three sets: LibreOffice reads none of the stream
    [(88, [(2, blob(100))]), (600, [(2, blob(100))]), (900, [(2, blob(1000))])],
])
def test_a_stream_whose_properties_are_read_whole_is_left_as_it_is(sets):
    assert ppt_links.padded(summary(*sets)) is None


def test_no_copy_of_a_deck_whose_hyperlinks_are_read_whole_or_that_cannot_be_read(tmp_path):
    assert ppt_links.given_whole(CORPUS / "ppt" / "WithLinks.ppt", tmp_path) is None
    junk = tmp_path / "junk.ppt"
    junk.write_bytes(b"\xd0\xcf\x11\xe0\xa1\xb1\x1a\xe1" + bytes(600))
    assert ppt_links.given_whole(junk, tmp_path) is None
    assert not (tmp_path / "links").exists()


def hyperlink_blob(targets):
    """The VT_BLOB of a _PID_HLINKS list of ``targets`` as PowerPoint writes it: four numbers and two strings each."""
    values = bytearray()
    for target in targets:
        values += b"".join(struct.pack("<Ii", 0x03, number) for number in (7, 6, 0, 7))
        for text in (target, ""):
            chars = len(text) + 1
            values += struct.pack("<II", 0x1F, chars) + (text + "\0").encode("utf-16-le") + bytes(2 * (chars & 1))
    body = struct.pack("<I", 6 * len(targets)) + values
    return struct.pack("<II", 0x41, len(body)) + body


def test_how_many_hyperlinks_libreoffice_reads_is_the_cut_less_the_entries_past_it():
    """Twenty links of 64 characters (184 bytes an entry) in a user-defined set 1,000 bytes into the stream:
    LibreOffice reads the set's size less 1,000 bytes of the list, the first entries whole. Laid out again, it
    reads all twenty."""
    targets = [f"http://example.com/{index:02d}/" + "x" * 42 for index in range(20)]
    first = [(1, struct.pack("<IHH", 2, 1252, 0)), (2, bytes(400)), (3, bytes(400))]
    data = summary((68, first), (1000, [(2, hyperlink_blob(targets))]))
    size = struct.unpack_from("<I", data, 1000)[0]
    # an entry: four typed numbers, the target (65 characters with its end, 2 bytes more to align), an empty location
    entry = 4 * 8 + (8 + 2 * 65 + 2) + (8 + 2 + 2)
    whole = (size - 1000 - 8 - 4) // entry  # what LibreOffice reads, less the blob's type, size and count
    assert ppt_links.kept_entries(data) == whole < 20
    assert ppt_links.kept_entries(ppt_links.padded(data)) == 20
    small = summary((68, first), (1000, [(2, hyperlink_blob(targets[:3]))]))  # a set smaller than its offset
    assert ppt_links.kept_entries(small) == 3
    assert ppt_links.kept_entries(summary((68, first))) is None  # no user-defined set


@pytest.mark.parametrize(("name", "where"), [
    # a picture's click on each slide
    ("42520.ppt", [f"slide {number}" for number in range(1, 20)]),
    # text links: two of slide 36's seven go to one address, and one of them covers paragraph marks only
    ("41246-1.ppt", ["slide 28"] + ["slide 36"] * 6),
    # links to other slides of the deck (their location only), in text and on shapes
    ("42486.ppt", ["slide 19"] * 3 + ["slide 20"] * 2 + ["slide 21"] * 3 + ["slide 22"] * 3 + ["slide 23"] * 8
     + ["slide 24"] * 3 + ["slide 33"]),
    # a notes page's link is not a slide's
    ("WithLinks.ppt", ["slide 1", "slide 1", "slide 2"]),
])
def test_a_decks_hyperlinks_are_counted_slide_by_slide(name, where):
    held = inventory.of_source(CORPUS / "ppt" / name, "ppt")
    assert held.where["hyperlinks"] == where
    assert held.counts["hyperlinks"] == len(where)
