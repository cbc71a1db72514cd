# Copyright: sglang-deploy contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The option of every module that runs nvidia-smi."""

from __future__ import annotations


class ModuleDocFragment:
    """``sglang.deploy.nvidia_smi``: which nvidia-smi to run."""

    DOCUMENTATION = r"""
options:
  nvidia_smi_path:
    description: The C(nvidia-smi) command, a name on C(PATH) or a path.
    type: str
    default: nvidia-smi
"""
