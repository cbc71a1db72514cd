"""Shared pytest setup: the project's Python lives in plugins/ (not an installed package)."""

from __future__ import annotations

import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
for sub in ("plugins/module_utils", "plugins/modules", "plugins/filter", "plugins/callback"):
    path = str(ROOT / sub)
    if path not in sys.path:
        sys.path.insert(0, path)
