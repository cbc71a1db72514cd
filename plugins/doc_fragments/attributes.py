# Copyright: sglang-deploy contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The attributes every module of sglang.deploy declares (check mode, diff mode, platform)."""

from __future__ import annotations


class ModuleDocFragment:
    """``sglang.deploy.attributes`` describes the attributes; each module then states its support, or
    adds ``sglang.deploy.attributes.read_only`` when it changes nothing on the host."""

    DOCUMENTATION = r"""
options: {}
attributes:
  check_mode:
    description: Can run in check mode and return a changed status prediction without modifying the target.
  diff_mode:
    description: Returns details on what has changed (or would change in check mode) when in diff mode.
  platform:
    description: Target operating systems the module runs on.
    support: full
    platforms: posix
"""

    READ_ONLY = r"""
options: {}
attributes:
  check_mode:
    support: full
    details: The module only reads, so it does the same in check mode.
  diff_mode:
    support: N/A
    details: The module only reads the host; there is nothing to diff.
"""
