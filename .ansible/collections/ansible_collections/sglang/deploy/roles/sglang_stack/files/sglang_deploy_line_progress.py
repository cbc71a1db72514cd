"""One journal line per progress-bar update for services run by sglang-deploy.

tqdm (SGLang's weight-loading bar) redraws with a carriage return and no newline. journald splits a
service's output only at newlines, so during a 10-minute load the journal shows nothing of the bar
until it closes. Imported at interpreter start by sglang_deploy_line_progress.pth; active only when
SGLANG_DEPLOY_LINE_PROGRESS=1 (set in the unit's environment file) and stderr is not a terminal.
Each carriage return that would overwrite a line becomes a newline; nothing else changes.
"""

import os
import sys
from typing import Any, TextIO


class LineProgressStream:
    """Wraps a text stream; every other attribute is the wrapped stream's."""

    def __init__(self, stream: TextIO) -> None:
        self._stream = stream
        self._at_line_start = True
        self._pending_cr = False  # a \r whose meaning depends on the next character (\r\n is one newline)

    def write(self, text: str) -> int:
        out = []
        for char in text:
            if char == "\r":
                self._pending_cr = True
                continue
            if self._pending_cr and char != "\n" and not self._at_line_start:
                out.append("\n")  # the redraw starts a new journal line
            self._pending_cr = False
            out.append(char)
            self._at_line_start = char == "\n"
        self._stream.write("".join(out))
        return len(text)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._stream, name)


def install() -> None:
    stream = sys.stderr
    if os.environ.get("SGLANG_DEPLOY_LINE_PROGRESS") != "1" or stream is None:
        return
    try:
        if stream.isatty():
            return
    except (AttributeError, ValueError):
        return
    if not isinstance(stream, LineProgressStream):
        sys.stderr = LineProgressStream(stream)


install()
