"""Strings from result files on a Markdown page: escaped, so that a result file (one from a
bundle made elsewhere, say) cannot add links, images, raw HTML or table cells to a report.
The LaTeX twin is :func:`weince.report.tables.latex_escape`; strings with a format (commits,
config hashes, dates) are validated instead (:class:`weince.utils.results.Provenance`)."""

from __future__ import annotations

import re
from typing import Any

__all__ = ["md_escape"]

_MD_SPECIAL = re.compile(r"([\\`*_\[\]<>|!#~])")


def md_escape(text: Any) -> str:
    """``text`` as literal Markdown: control characters and line breaks become spaces, and
    every character Markdown could read as markup (emphasis, code, links, images, raw
    HTML, table cells, headings) is backslash-escaped."""
    return _MD_SPECIAL.sub(r"\\\1", re.sub(r"[\x00-\x1f\x7f]+", " ", str(text)))
