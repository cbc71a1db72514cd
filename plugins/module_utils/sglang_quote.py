# Copyright: sglang-deploy contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Quoting for systemd: ExecStart words and EnvironmentFile lines. The templates call these through
the config filters and build no quoting of their own."""

from __future__ import annotations

import re

_SAFE_WORD = re.compile(r"^[A-Za-z0-9_@+=:,./-]+$")
ENV_NAME_RE = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")


def systemd_quote(word: str) -> str:
    """One ExecStart word: `%` -> `%%` (specifiers), `$` -> `$$` (variable expansion), C-style
    escapes for backslash, quotes and control characters, double quotes around anything that is
    not a plain word (spaces, empty, quotes, a lone `;`)."""
    text = str(word).replace("%", "%%").replace("$", "$$")
    if _SAFE_WORD.match(text) and text != ";":
        return text
    escaped = (text.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n")
               .replace("\t", "\\t").replace("\r", "\\r"))
    return f'"{escaped}"'


def systemd_exec_line(prefix: list[str], args: list[list[str]] | None = None) -> str:
    """An ExecStart value: the interpreter words, then one flag (with its values) per continued
    line, so a changed flag is a one-line diff. The first word must be an absolute path."""
    if not prefix or not str(prefix[0]).startswith("/"):
        raise ValueError(f"ExecStart must start with an absolute path, got {prefix[:1]!r}")
    lines = [" ".join(systemd_quote(word) for word in prefix)]
    lines += ["    " + " ".join(systemd_quote(word) for word in group) for group in args or [] if group]
    return " \\\n".join(lines)


def env_file_lines(env: dict[str, str]) -> str:
    """EnvironmentFile content: `NAME="value"` per line. Values are double-quoted with backslash
    escapes; systemd applies no specifier or variable expansion in EnvironmentFile=."""
    lines = []
    for name, value in env.items():
        if not ENV_NAME_RE.match(str(name)):
            raise ValueError(f"bad environment variable name {name!r}")
        escaped = str(value).replace("\\", "\\\\").replace('"', '\\"').replace("$", "\\$").replace("`", "\\`")
        lines.append(f'{name}="{escaped}"')
    return "\n".join(lines)


def first_control_character(text: str) -> int | None:
    """Where the first control character (Unicode category Cc: C0, DEL, C1) of `text` is, or None.
    A newline would end a unit or environment-file line; others make systemd refuse the unit."""
    return next((index for index, char in enumerate(text) if ord(char) < 0x20 or 0x7F <= ord(char) <= 0x9F), None)


def unit_text(text: str) -> str:
    """Free text on one unit line (Description=): `%` -> `%%` (specifiers); a control character raises
    ValueError."""
    index = first_control_character(text)
    if index is not None:
        raise ValueError(f"{text!r} contains the control character {text[index]!r}")
    return text.replace("%", "%%")
