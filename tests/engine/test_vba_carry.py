"""The source's own VBA project of a .doc/.xls in its .docm/.xlsm (``vbaproject``, ``cfb``): every stream and storage
byte for byte, where LibreOffice's rewrite loses a UserForm's designer storage and changes class modules.

The files are made here: LibreOffice saves a .doc and an .xls (conftest's ``legacy``), and a VBA project storage
built to [MS-OVBA] (a standard module; in the .xls also a class module and a UserForm with a button, its designer
storage after [MS-OFORMS]) is added to each with ``cfb.write``, as Word and Excel keep it."""

import os
import struct
import subprocess
import uuid
import zipfile

import docx.package
import olefile
import openpyxl
import pytest
from conftest import DOC_PARAGRAPHS, SOFFICE_PROFILE
from docx.opc.part import PartFactory
from docx.parts.document import DocumentPart

from docshift.engine import cfb, convert, inventory, vba, vbaproject
from docshift.engine.inventory.common import Inventory

FORM_CLSID = uuid.UUID("C62A69F0-16DC-11CE-9E98-00AA00574A4F").bytes_le
MODULE = 'Attribute VB_Name = "Module1"\r\nPublic Function Twice(x)\r\n    Twice = 2 * x\r\nEnd Function\r\n'
CLASS = ('Attribute VB_Name = "Counter"\r\nAttribute VB_GlobalNameSpace = False\r\nAttribute VB_Creatable = False\r\n'
         'Attribute VB_PredeclaredId = False\r\nAttribute VB_Exposed = False\r\nPrivate n As Long\r\n'
         'Public Sub Add()\r\n    n = n + 1\r\nEnd Sub\r\n')
FORM = ('Attribute VB_Name = "UserForm1"\r\nAttribute VB_Base = "0{C62A69F0-16DC-11CE-9E98-00AA00574A4F}'
        '{8BD21D30-EC42-11CE-9E0D-00AA006002F3}"\r\nAttribute VB_GlobalNameSpace = False\r\n'
        'Attribute VB_Creatable = False\r\nAttribute VB_PredeclaredId = True\r\nAttribute VB_Exposed = False\r\n'
        'Private Sub CommandButton1_Click()\r\n    Me.Hide\r\nEnd Sub\r\n')


def document_module(name, base):
    return (f'Attribute VB_Name = "{name}"\r\nAttribute VB_Base = "{base}"\r\nAttribute VB_GlobalNameSpace = False\r\n'
            'Attribute VB_Creatable = False\r\nAttribute VB_PredeclaredId = True\r\nAttribute VB_Exposed = True\r\n')


def compress(data):
    """[MS-OVBA] 2.4.1 CompressedContainer: full chunks stored raw, the last one as literal tokens only."""
    out = bytearray(b"\x01")
    for start in range(0, len(data), 4096):
        chunk = data[start:start + 4096]
        if len(chunk) == 4096:
            out += struct.pack("<H", 0x3FFF) + chunk
            continue
        body = b"".join(b"\x00" + chunk[i:i + 8] for i in range(0, len(chunk), 8))
        assert len(body) <= 4096
        out += struct.pack("<H", 0xB000 | (len(body) - 1)) + body
    return bytes(out)


def record(record_id, data=b""):
    return struct.pack("<HI", record_id, len(data)) + data


def dir_stream(modules):
    """The ``VBA/dir`` stream: project information, a reference to stdole, the modules [(name, procedural)]."""
    libid = b"*\\G{00020430-0000-0000-C000-000000000046}#2.0#0#C:\\Windows\\System32\\stdole2.tlb#OLE Automation"
    lcid = struct.pack("<I", 0x409)
    data = (record(1, struct.pack("<I", 1)) + record(2, lcid) + record(0x14, lcid) + record(3, struct.pack("<H", 1252))
            + record(4, b"VBAProject") + record(5) + record(0x40) + record(6)
            + record(0x3D) + record(7, struct.pack("<I", 0)) + record(8, struct.pack("<I", 0))
            + struct.pack("<HIIH", 9, 4, 1, 2) + record(0x0C) + record(0x3C)
            + record(0x16, b"stdole") + record(0x3E, "stdole".encode("utf-16-le"))
            + record(0x0D, struct.pack("<I", len(libid)) + libid + struct.pack("<IH", 0, 0))
            + record(0x0F, struct.pack("<H", len(modules))) + record(0x13, struct.pack("<H", 0xFFFF)))
    for name, procedural in modules:
        data += (record(0x19, name.encode()) + record(0x47, name.encode("utf-16-le")) + record(0x1A, name.encode())
                 + record(0x32, name.encode("utf-16-le")) + record(0x1C) + record(0x48) + record(0x31, bytes(4))
                 + record(0x1E, bytes(4)) + record(0x2C, struct.pack("<H", 0xFFFF))
                 + record(0x21 if procedural else 0x22) + record(0x2B))
    return compress(data + record(0x10))


def user_form():
    """A UserForm's designer storage with one CommandButton: ``f`` (FormControl and its one site), ``o`` (the
    button's CommandButtonControl), ``\\x01CompObj``, ``\\x03VBFrame``."""
    name = b"CommandButton1"
    site = struct.pack("<I", 0x80000000 | len(name)) + struct.pack("<IIH", 1, 24, 17) + bytes(2)  # id, size, class
    site += name + bytes(-len(name) % 4) + struct.pack("<ii", 600, 600)
    mask = 1 | 4 | 32 | 128 | 256  # fName, fID, fObjectStreamSize, fClsidCacheIndex, fPosition
    site = struct.pack("<HHI", 0, len(site) + 4, mask) + site
    sites = struct.pack("<BBxx", 0, 1) + site  # depth 0, one OLE site, padded to 4
    form = struct.pack("<BBHII", 0, 4, 8, 1 << 3, 2) + struct.pack("<H", 0) + struct.pack("<II", 1, len(sites)) + sites
    caption = b"OK"
    body = struct.pack("<II", 1 << 3, 0x80000000 | len(caption)) + caption + bytes(-len(caption) % 4)
    button = struct.pack("<BBH", 0, 2, len(body)) + body + struct.pack("<BBHI", 0, 2, 4, 0)  # and empty TextProps
    frame = (b'VERSION 5.00\r\nBegin {C62A69F0-16DC-11CE-9E98-00AA00574A4F} UserForm1 \r\n   Caption = "UserForm1"\r\n'
             b'   ClientHeight = 3000\r\n   ClientWidth = 4500\r\n   StartUpPosition = 1\r\nEnd\r\n')
    comp = (struct.pack("<IIi", 0xFFFE0001, 0x00000A03, -1) + FORM_CLSID
            + b"".join(struct.pack("<I", len(text)) + text for text in
                       (b"Microsoft Forms 2.0 Form\0", b"Embedded Object\0", b"Forms.Form.1\0"))
            + struct.pack("<IIII", 0x71B239F4, 0, 0, 0))
    return cfb.Entry("UserForm1", clsid=FORM_CLSID, children=[
        cfb.Entry("\x01CompObj", comp), cfb.Entry("\x03VBFrame", frame), cfb.Entry("f", form),
        cfb.Entry("o", button)])


def project_storage(kind, signed=False):
    """The ``Macros`` (.doc) or ``_VBA_PROJECT_CUR`` (.xls) storage: {name: code} of its modules, and the storage."""
    if kind == "doc":
        codes = {"ThisDocument": document_module("ThisDocument", "1Normal.ThisDocument"), "Module1": MODULE}
        lines = ["Document=ThisDocument/&H00000000", "Module=Module1"]
    else:
        codes = {"ThisWorkbook": document_module("ThisWorkbook", "0{00020819-0000-0000-C000-000000000046}"),
                 "Module1": MODULE, "Counter": CLASS, "UserForm1": FORM}
        lines = ["Document=ThisWorkbook/&H00000000", "Module=Module1", "Class=Counter", "BaseClass=UserForm1"]
    procedural = {"Module1"}
    text = "\r\n".join(['ID="{5A0E8AE0-0D8C-4F7A-9C1E-6A1E1D3E2F10}"', *lines, 'Name="VBAProject"',
                       'HelpContextID="0"', 'VersionCompatible32="393222000"', "", "[Host Extender Info]",
                       "&H00000001={3832D640-CF90-11CF-8E43-00A0C911005A};VBE;&H00000000", "", "[Workspace]",
                       *(f"{name}=0, 0, 0, 0, C" for name in codes), ""])
    wm = b"".join(name.encode() + b"\0" + name.encode("utf-16-le") + b"\0\0" for name in codes) + b"\0\0"
    modules = [cfb.Entry(name, compress(code.encode("cp1252"))) for name, code in codes.items()]
    vba_storage = cfb.Entry("VBA", children=[cfb.Entry("_VBA_PROJECT", bytes.fromhex("cc61ffff000000")),
                                             cfb.Entry("dir", dir_stream([(n, n in procedural) for n in codes])),
                                             *modules])
    children = [cfb.Entry("PROJECT", text.encode("cp1252")), cfb.Entry("PROJECTwm", wm), vba_storage]
    if kind == "xls":
        children.append(user_form())
    if signed:
        children.append(cfb.Entry("\x05DigitalSignature", b"\x30\x82" + bytes(200)))
    return codes, cfb.Entry(vbaproject.PROJECT_STORAGE[kind], children=children)


def with_obproj(workbook):
    """The Workbook stream with the OBPROJ record that says it has a VBA project (LibreOffice imports one only then)
    before its first BOUNDSHEET, whose sheet offsets move by its 4 bytes."""
    records, pos = [], 0
    while pos < len(workbook):
        size = struct.unpack_from("<H", workbook, pos + 2)[0]
        records.append(bytearray(workbook[pos:pos + 4 + size]))
        pos += 4 + size
    first = next(i for i, rec in enumerate(records) if rec[:2] == b"\x85\x00")
    for rec in records[first:]:
        if rec[:2] == b"\x85\x00":
            struct.pack_into("<I", rec, 4, struct.unpack_from("<I", rec, 4)[0] + 4)
    return b"".join(records[:first]) + b"\xd3\x00\x00\x00" + b"".join(records[first:])


def with_project(path, out, kind, signed=False):
    """The LibreOffice-made legacy file ``path`` written to ``out`` with a project storage added at its root."""
    with olefile.OleFileIO(str(path)) as ole:
        root = cfb.read_storage(ole, "", 64 << 20)
    codes, storage = project_storage(kind, signed)
    root.children.append(storage)
    for entry in root.children:
        if entry.name == "Workbook":
            entry.data = with_obproj(entry.data)
    out.write_bytes(cfb.write(root))
    return codes


@pytest.fixture(scope="module")
def made(legacy, tmp_path_factory):
    """{kind: (legacy file with a VBA project, {module: code})}; "xls-signed" carries a signature stream too."""
    out = tmp_path_factory.mktemp("vba-made")
    found = {}
    for kind, source, signed in (("doc", "doc", False), ("xls", "xls", False), ("xls-signed", "xls", True)):
        path = out / f"macros-{kind}.{source}"
        found[kind] = (path, with_project(legacy[source], path, source, signed))
    return found


def project_of(package):
    with zipfile.ZipFile(package) as zip_file:
        name = next(n for n in zip_file.namelist() if n.endswith("/vbaProject.bin"))
        return zip_file.read(name)


def storage_of(path, name):
    with olefile.OleFileIO(path if isinstance(path, bytes) else str(path)) as ole:
        return cfb.read_storage(ole, name, 64 << 20)


# cfb ------------------------------------------------------------------------------------------------------------

def test_cfb_writes_what_olefile_reads_back():
    clsid = uuid.uuid4().bytes_le
    tree = cfb.Entry("root", clsid=clsid, children=[
        *(cfb.Entry(f"s{i}", bytes([i]) * (i * 150)) for i in range(40)),  # mini and regular streams
        cfb.Entry("big", bytes(range(256)) * 800), cfb.Entry("empty", b""),
        cfb.Entry("Store", clsid=FORM_CLSID, state=7,
                  children=[cfb.Entry("inner", b"x" * 5000), cfb.Entry("Deeper", children=[cfb.Entry("a", b"1")])])])
    data = cfb.write(tree)
    with olefile.OleFileIO(data, raise_defects=olefile.DEFECT_INCORRECT) as ole:
        assert not ole.parsing_issues
        for path, content in tree.streams().items():
            assert ole.openstream(path).read() == content, path
        assert ole.root.clsid == str(uuid.UUID(bytes_le=clsid)).upper()
        assert ole.getclsid("Store") == str(uuid.UUID(bytes_le=FORM_CLSID)).upper()
        assert ole.get_type("Store/Deeper") == olefile.STGTY_STORAGE
    again = storage_of(data, "")
    assert again.streams() == tree.streams() and again.storages() == tree.storages()


def test_cfb_writes_files_whose_fat_the_header_cannot_list():
    """Past 109 FAT sectors (about 6.8 MB), DIFAT sectors list the rest, chained: olefile reads each stream back,
    with nothing it finds amiss."""
    for size in (7 << 20, 24 << 20):
        tree = cfb.Entry("root", children=[cfb.Entry("big", os.urandom(size)), cfb.Entry("small", b"abc" * 10),
                                           cfb.Entry("Store", children=[cfb.Entry("inner", b"y" * 5000)])])
        with olefile.OleFileIO(cfb.write(tree), raise_defects=olefile.DEFECT_INCORRECT) as ole:
            assert not ole.parsing_issues
            assert ole.num_difat_sectors == (1 if size < 16 << 20 else 3)
            for path, content in tree.streams().items():
                assert ole.openstream(path).read() == content, path


def test_cfb_directory_trees_are_red_black():
    tree = cfb.Entry("root", children=[cfb.Entry(f"n{i:02}", b"x") for i in range(23)])
    with olefile.OleFileIO(cfb.write(tree)) as ole:
        entries = {entry.sid: entry for entry in ole.direntries if entry is not None}

        def black_height(sid):
            if sid == cfb.NOSTREAM:
                return 1
            entry = entries[sid]
            heights = {black_height(entry.sid_left), black_height(entry.sid_right)}
            assert len(heights) == 1, "paths with different numbers of black entries"
            if entry.color == cfb.RED:
                for kid in (entry.sid_left, entry.sid_right):
                    assert kid == cfb.NOSTREAM or entries[kid].color == cfb.BLACK, "a red entry with a red child"
            return heights.pop() + (entry.color == cfb.BLACK)

        assert entries[ole.root.sid_child].color == cfb.BLACK
        black_height(ole.root.sid_child)


def test_cfb_refuses_what_the_format_cannot_hold():
    for children in ([cfb.Entry("x" * 32, b"")], [cfb.Entry("a/b", b"")], [cfb.Entry("Same", b""),
                                                                            cfb.Entry("SAME", b"")]):
        with pytest.raises(ValueError):
            cfb.write(cfb.Entry("root", children=children))


# the source's own project ---------------------------------------------------------------------------------------

@pytest.mark.parametrize("kind,name", [("doc", "SimpleMacro.doc"), ("xls", "SimpleMacro.xls"), ("xls", "44891.xls")])
def test_carry_copies_the_project_storage_of_corpus_files(kind, name):
    from test_vba import corpus

    source = corpus(kind, name)
    project = vbaproject.carry(source, kind)
    assert project is not None
    assert storage_of(project, "").streams() == storage_of(source, vbaproject.PROJECT_STORAGE[kind]).streams()
    assert vba.modules(project) == vba.modules(source)


def test_carry_nothing_without_a_project(legacy, tmp_path):
    assert vbaproject.carry(legacy["doc"], "doc") is None
    assert vbaproject.carry(legacy["ppt"], "ppt") is None
    assert vbaproject.of_source(legacy["xls"], "xls") is None
    junk = tmp_path / "junk.xls"
    junk.write_bytes(olefile.MAGIC + b"\xff" * 4000)
    assert vbaproject.carry(junk, "xls") is None


@pytest.mark.parametrize("kind,extension", [("doc", "docm"), ("xls", "xlsm")])
def test_the_result_carries_the_project_storage_byte_for_byte(office, made, kind, extension, tmp_path,
                                                               monkeypatch):
    source, codes = made[kind]
    assert {name: code.replace("\r\n", "\n") for name, code in vba.modules(source).items()} == \
           {name: code.replace("\r\n", "\n") for name, code in codes.items()}, "olevba reads the made project"
    converted = convert.convert(office, source, kind, tmp_path, 60)
    assert converted.extension == extension
    project = project_of(converted.path)
    theirs = storage_of(project, "")
    ours = storage_of(source, vbaproject.PROJECT_STORAGE[kind])
    assert theirs.streams() == ours.streams()  # every module, class module and form stream
    assert theirs.storages() == ours.storages()  # VBA, and the UserForm's designer storage with its CLSID
    if kind == "xls":
        assert {"UserForm1/f", "UserForm1/o", "VBA/Counter"} <= set(theirs.streams())
    assert vba.modules(converted.path) == vba.modules(source)
    assert converted.fidelity["complete"] is True, converted.fidelity["lost"]
    assert converted.fidelity["counts"]["macros"] == {"source": len(codes), "result": len(codes)}
    # the result opens in the libraries clients use and in LibreOffice again
    if kind == "xls":
        book = openpyxl.load_workbook(converted.path, keep_vba=True)
        assert book.vba_archive is not None and book.sheetnames
        book.vba_archive.close()  # openpyxl leaves its in-memory zip open: closed at collection, it warns
    else:  # python-docx opens a .docm when told its main part is a document (docx.Document refuses the type)
        monkeypatch.setitem(PartFactory.part_type_for, vba.PACKAGES["doc"][3], DocumentPart)
        document = docx.package.Package.open(str(converted.path)).main_document_part.document
        assert document.paragraphs[0].text == DOC_PARAGRAPHS[0]
    again = tmp_path / "again"
    subprocess.run(["soffice", "--headless", "--norestore", f"-env:UserInstallation={SOFFICE_PROFILE}",
                    "--convert-to", "pdf", "--outdir", str(again), str(converted.path)],
                   check=True, capture_output=True, timeout=120)
    assert (again / f"{converted.path.stem}.pdf").read_bytes().startswith(b"%PDF")


def test_libreoffices_rewrite_is_named_with_what_it_loses(made, tmp_path):
    """LibreOffice's own .xlsm of the made .xls: the UserForm's storage is gone, the class module changed; the
    report says the project is LibreOffice's rewrite and names the UserForm."""
    source, _ = made["xls"]
    subprocess.run(["soffice", "--headless", "--norestore", f"-env:UserInstallation={SOFFICE_PROFILE}",
                    "--convert-to", "xlsm:Calc MS Excel 2007 VBA XML", "--outdir", str(tmp_path), str(source)],
                   check=True, capture_output=True, timeout=120)
    rewrite = tmp_path / f"{source.stem}.xlsm"
    assert "UserForm1/f" not in storage_of(project_of(rewrite), "").streams()
    assert "Option ClassModule" in vba.modules(rewrite)["Counter"]  # not VBA: Excel stops on a compile error
    fidelity = inventory.report(inventory.of_source(source, "xls"), inventory.of_result(rewrite, "xls"))
    details = [loss["detail"] for loss in fidelity["lost"] if loss["what"] == "macros"]
    assert fidelity["complete"] is False
    assert any("LibreOffice's rewrite" in detail and "UserForm1" in detail for detail in details), details


def test_a_signature_is_left_out_and_named(office, made, tmp_path):
    source, _ = made["xls-signed"]
    assert vbaproject.of_source(source, "xls").signed
    converted = convert.convert(office, source, "xls", tmp_path, 60)
    streams = storage_of(project_of(converted.path), "").streams()
    assert "\x05DigitalSignature" not in streams and "UserForm1/f" in streams
    assert vba.modules(converted.path) == vba.modules(source)
    details = [loss["detail"] for loss in converted.fidelity["lost"] if loss["what"] == "macros"]
    assert details == ["the digital signature of the VBA project was removed: a signature cannot survive a new "
                       "container"]


def test_a_storage_that_cannot_be_read_is_named():
    source = Inventory("xls", {"macros": 1}, macros={"Module1": MODULE},
                       project=vbaproject.Storage(error="sector chain shorter than the stream"))
    result = Inventory("xls", {"macros": 1}, macros={"Module1": MODULE}, project=vbaproject.Storage({"PROJECT": b""}))
    lost = inventory.report(source, result)["lost"]
    assert [loss["what"] for loss in lost] == ["macros"]
    assert "could not be read" in lost[0]["detail"] and "LibreOffice's rewrite" in lost[0]["detail"]

