"""``--output-format junit``: a JUnit XML report, one test case per diagnostic, one suite per file.

The shape is Ruff's ``junit`` format::

    <?xml version="1.0" encoding="UTF-8"?>
    <testsuites name="xla-lint" tests="2" failures="2" errors="0">
        <testsuite name="train.py" tests="2" disabled="0" errors="0" failures="2" package="org.xla_lint">
            <testcase name="org.xla_lint.XLA004" classname="train" line="5" column="1">
                <properties>
                    <property name="severity" value="warning"/>
                </properties>
                <failure message="`print` without ...">line 5, col 1, `print` without ...</failure>
            </testcase>
            ...

``classname`` is the path without its suffix (``pkg/train`` for ``pkg/train.py``). A run
with no diagnostics gives one suite ``xla-lint`` with one passing test case ``No errors
found``, as Ruff does, so a CI that refuses an empty report (Jenkins' ``junit`` step) still
reads it. Text is escaped by :mod:`xml.etree.ElementTree` (``&``, ``<``, quotes; line
breaks in attributes as ``&#10;``). Characters XML 1.0 cannot carry at all (control
characters, and the bytes of a file name that is not UTF-8, which Python holds as lone
surrogates) are written as ``\\xNN`` escapes, so ``bad\\xffname.py`` is the name of a file
whose name has the byte 0xFF.
"""

from __future__ import annotations

import os
import re
import xml.etree.ElementTree as ET

from ..diagnostics import Diagnostic
from . import Report

PACKAGE = "org.xla_lint"

# Code points XML 1.0 does not allow (https://www.w3.org/TR/xml/#charsets).
_NOT_XML = re.compile("[^\t\n\r\x20-\ud7ff\ue000-\ufffd\U00010000-\U0010ffff]")


def _escape(char: str) -> str:
    code = ord(char)
    if 0xDC80 <= code <= 0xDCFF:  # a byte that was not UTF-8, as os.fsdecode keeps it
        return f"\\x{code - 0xDC00:02x}"
    return char.encode("unicode_escape").decode("ascii")


def xml_text(text: str) -> str:
    """``text`` with what XML 1.0 cannot hold written as ``\\xNN``/``\\uNNNN`` escapes
    (a lone surrogate from a non-UTF-8 file name becomes the ``\\xNN`` of its byte)."""
    return _NOT_XML.sub(lambda m: _escape(m.group()), text)


def _case(suite: ET.Element, d: Diagnostic) -> None:
    case = ET.SubElement(
        suite,
        "testcase",
        {
            "name": f"{PACKAGE}.{d.code}",
            "classname": xml_text(os.path.splitext(d.path)[0]),
            "line": str(d.line),
            "column": str(d.column),
        },
    )
    props = ET.SubElement(case, "properties")
    ET.SubElement(props, "property", {"name": "severity", "value": d.severity.value})
    message = xml_text(d.message)
    failure = ET.SubElement(case, "failure", {"message": message})
    failure.text = f"line {d.line}, col {d.column}, {message}"


def junit_tree(report: Report) -> ET.Element:
    """The ``<testsuites>`` element of ``report``."""
    n = len(report.diagnostics)
    root = ET.Element(
        "testsuites",
        {"name": "xla-lint", "tests": str(max(n, 1)), "failures": str(n), "errors": "0"},
    )
    if not n:
        suite = ET.SubElement(
            root,
            "testsuite",
            {
                "name": "xla-lint",
                "tests": "1",
                "disabled": "0",
                "errors": "0",
                "failures": "0",
                "package": PACKAGE,
            },
        )
        ET.SubElement(suite, "testcase", {"name": "No errors found", "classname": "xla-lint"})
        return root
    by_path: dict[str, list[Diagnostic]] = {}
    for d in report.diagnostics:
        by_path.setdefault(d.path, []).append(d)
    for path, items in by_path.items():
        suite = ET.SubElement(
            root,
            "testsuite",
            {
                "name": xml_text(path),
                "tests": str(len(items)),
                "disabled": "0",
                "errors": "0",
                "failures": str(len(items)),
                "package": PACKAGE,
            },
        )
        for d in items:
            _case(suite, d)
    return root


def render(report: Report) -> str:
    root = junit_tree(report)
    ET.indent(root, space="    ")
    return '<?xml version="1.0" encoding="UTF-8"?>\n' + ET.tostring(root, encoding="unicode") + "\n"
