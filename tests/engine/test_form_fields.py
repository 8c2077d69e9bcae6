"""A Word form's settings beyond each field's name, type and result: LibreOffice's import of a .doc drops a text
field's default and format, the help text F1 shows, a drop-down's status text, a check box's default and the macros
a field runs; the result gets them back from the .doc's FFData."""

import re
import zipfile
from collections import defaultdict, deque

import pytest
from conftest import _soffice_save as soffice

from docshift.contract import Macros
from docshift.engine import convert, form_fields
from docshift.engine.form_fields import FormField
from docshift.engine.inventory.package import NS_W

FIELD_NS = "urn:openoffice:names:experimental:ooo-ms-interop:xmlns:field:1.0"
SOURCE_PARAMS = {"Help": "As on your passport", "Hint": "Your full name", "Content": "Type your name",
                 "Format": "UPPERCASE"}
FORM = (
    '<?xml version="1.0" encoding="UTF-8"?><office:document '
    'xmlns:office="urn:oasis:names:tc:opendocument:xmlns:office:1.0" '
    'xmlns:text="urn:oasis:names:tc:opendocument:xmlns:text:1.0" '
    f'xmlns:field="{FIELD_NS}" office:version="1.2" office:mimetype="application/vnd.oasis.opendocument.text">'
    '<office:body><office:text><text:p>Name: <field:fieldmark-start text:name="Applicant" '
    'field:type="vnd.oasis.opendocument.field.FORMTEXT">'
    + "".join(f'<field:param field:name="{name}" field:value="{value}"/>' for name, value in SOURCE_PARAMS.items())
    + '<field:param field:name="EntryMacro" field:value="Check"/><field:param field:name="ExitMacro" '
    'field:value="Done"/></field:fieldmark-start><field:fieldmark-separator/>Ann Smith<field:fieldmark-end/></text:p>'
    '<text:p>Role: <field:fieldmark text:name="Role" field:type="vnd.oasis.opendocument.field.FORMDROPDOWN">'
    '<field:param field:name="Dropdown_ListEntry" field:value="Buyer"/><field:param field:name="Dropdown_ListEntry" '
    'field:value="Seller"/><field:param field:name="Dropdown_Selected" field:value="1"/><field:param '
    'field:name="Help" field:value="Pick one"/><field:param field:name="Hint" field:value="Your role in the sale"/>'
    '</field:fieldmark></text:p></office:text></office:body></office:document>')
PARAM = re.compile(r'<field:param field:name="([^"]*)" field:value="([^"]*)"/>')


@pytest.fixture(scope="module")
def form(tmp_path_factory):
    """A .doc saved by LibreOffice: a text field with help, status text, default, format and macros, and a
    drop-down with help and status text."""
    out = tmp_path_factory.mktemp("form")
    (out / "form.fodt").write_text(FORM)
    return soffice(out / "form.fodt", "doc", out)


def params(result, tmp_path):
    """{field name: {parameter: value}} as LibreOffice reads the fields of the .docx ``result`` back."""
    read = soffice(result, "fodt", tmp_path).read_text()
    found = {}
    for mark in re.finditer(r'<field:fieldmark(?:-start)? text:name="([^"]*)"[^>]*>(.*?)</field:fieldmark', read):
        found[mark.group(1)] = dict(PARAM.findall(mark.group(2)))
    return found


def test_the_doc_holds_each_field_s_settings(form):
    text, drop_down = form_fields.fields_of(form)
    assert text == FormField("textInput", "Applicant", (
        ("entryMacro", (("val", "Check"),)), ("exitMacro", (("val", "Done"),)),
        ("helpText", (("type", "text"), ("val", "As on your passport"))),
        ("statusText", (("type", "text"), ("val", "Your full name")))),
        (("default", "Type your name"), ("format", "UPPERCASE")))
    role = "Your role in the sale"
    assert drop_down == FormField("ddList", "Role", (("helpText", (("type", "text"), ("val", "Pick one"))),
                                                     ("statusText", (("type", "text"), ("val", role)))), ())
    assert [element for element, _ in form_fields.fields_of(form, macros=False)[0].settings] == ["helpText",
                                                                                               "statusText"]


def test_a_form_s_settings_are_kept(office, form, tmp_path):
    """A plain soffice's .docx keeps the text field's status text only; docshift's has the macros (of a template:
    the .doc has no VBA project), the help texts, the default, the format and the drop-down's status text where Word
    writes them, and LibreOffice reads back from it what the form was made with."""
    plain = soffice(form, "docx", tmp_path / "plain")
    assert {name: set(values) for name, values in params(plain, tmp_path / "plain-read").items()} == {
        "Applicant": {"Hint"}, "Role": {"Dropdown_ListEntry", "Dropdown_Selected"}}
    converted = convert.convert(office, form, "doc", tmp_path / "work", 60).path
    with zipfile.ZipFile(converted) as package:
        body = package.read("word/document.xml").decode()
    assert re.findall(r"<w:ffData>.*?</w:ffData>", body) == [
        '<w:ffData><w:name w:val="Applicant"/><w:enabled/><w:calcOnExit w:val="0"/><w:entryMacro w:val="Check"/>'
        '<w:exitMacro w:val="Done"/><w:helpText w:type="text" '
        'w:val="As on your passport"/><w:statusText w:type="text" w:val="Your full name"/><w:textInput><w:default '
        'w:val="Type your name"/><w:format w:val="UPPERCASE"/></w:textInput></w:ffData>',
        '<w:ffData><w:name w:val="Role"/><w:enabled/><w:helpText w:type="text" w:val="Pick one"/><w:statusText '
        'w:type="text" w:val="Your role in the sale"/><w:ddList><w:result w:val="1"/><w:listEntry w:val="Buyer"/>'
        '<w:listEntry w:val="Seller"/></w:ddList></w:ffData>']
    read = params(converted, tmp_path / "read")
    assert read["Applicant"] == {**SOURCE_PARAMS, "EntryMacro": "Check", "ExitMacro": "Done"}
    assert read["Role"]["Help"] == "Pick one" and read["Role"]["Hint"] == "Your role in the sale"


def test_a_form_converted_without_macros_names_none(office, form, tmp_path):
    converted = convert.convert(office, form, "doc", tmp_path / "work", 60, macros=Macros.REMOVE).path
    with zipfile.ZipFile(converted) as package:
        body = package.read("word/document.xml").decode()
    assert "<w:helpText " in body and "Macro" not in body


def queue(*fields):
    found = defaultdict(deque)
    for field in fields:
        found[(field.kind, field.name)].append(field)
    return found


def form_field(data, prefix="w"):
    return (f'<{prefix}:r><{prefix}:fldChar {prefix}:fldCharType="begin"><{prefix}:ffData>{data}</{prefix}:ffData>'
            f'</{prefix}:fldChar></{prefix}:r>')


def test_settings_go_where_word_writes_them():
    """An empty textInput is opened; a check box's default goes before its state; a current time LibreOffice calls a
    current date gets its type back; an unnamed field of the .doc goes to the field of its kind that LibreOffice
    named from its bookmark; a field no field of the .doc matches, and one whose settings are there, stay."""
    body = (f'<w:document xmlns:w="{NS_W}" xmlns:v="{NS_W}"><w:body><w:p>'
            + form_field('<w:name w:val="Text1"/><w:enabled/><w:textInput/>')
            + form_field('<w:name w:val="Check1"/><w:checkBox><w:sizeAuto/><w:checked/></w:checkBox>')
            + form_field('<w:name w:val="Time"/><w:textInput><w:type w:val="currentDate"/><w:maxLength w:val="9"/>'
                         "</w:textInput>")
            + form_field('<w:name w:val="Other"/><w:textInput/>')
            + form_field('<v:name v:val="Mine"/><v:helpText v:type="text" v:val="kept"/><v:ddList/>', "v")
            + "</w:p></w:body></w:document>").encode()
    fields = queue(FormField("textInput", "", (("exitMacro", (("val", "Leave"),)),), (("default", "d"),)),
                   FormField("checkBox", "Check1", (), (("default", "1"),)),
                   FormField("textInput", "Time", (("statusText", (("type", "autoText"), ("val", "Clock"))),),
                             (("type", "currentTime"), ("format", "HH:mm"))),
                   FormField("ddList", "Mine", (("helpText", (("type", "text"), ("val", "other"))),), ()))
    written, given = form_fields.completed(body, "word/document.xml", fields)
    assert given == 6
    assert written == body.replace(
        b'<w:enabled/><w:textInput/>',
        b'<w:enabled/><w:exitMacro w:val="Leave"/><w:textInput><w:default w:val="d"/></w:textInput>').replace(
        b"<w:sizeAuto/><w:checked/>", b'<w:sizeAuto/><w:default w:val="1"/><w:checked/>').replace(
        b'<w:textInput><w:type w:val="currentDate"/><w:maxLength w:val="9"/></w:textInput>',
        b'<w:statusText w:type="autoText" w:val="Clock"/><w:textInput><w:type w:val="currentTime"/>'
        b'<w:maxLength w:val="9"/><w:format w:val="HH:mm"/></w:textInput>')
    assert not any(fields.values())
