#!/usr/bin/env bash
# NVIDIA's real CUDA 13.0 compiler, once per machine, for the tests that check the probe's toolchain and JIT
# checks against it (tests/unit/toolchain): nvcc, its crt headers and NVVM at 13.0.88, the 13.0.96 runtime and
# curand 10.4.0.35, the versions role sglang_stack installs from NVIDIA's apt repository (roles/sglang_stack/vars/
# main.yml), here from their PyPI wheels (those cuda-toolkit 13.0.3's extras require). nvcc compiles for any GPU
# without one. The wheels go into a cache OUTSIDE the clone, unpacked into a CUDA_HOME-shaped tree (bin, include,
# nvvm, lib64 with libcudart.so); prints that tree.
#
#   SGLANG_DEPLOY_CUDA_TOOLCHAIN  where it goes (default /var/cache/sglang-deploy/cuda-13.0.88)
#
# First fill: 5 wheels, about 160 MB downloaded, 380 MB unpacked, under 15 s here. Recorded beside the directory
# (<dir>.complete: the pins); changed pins fill a fresh directory that then replaces the old one.
set -euo pipefail
cd "$(dirname "$0")/.."
dest=${SGLANG_DEPLOY_CUDA_TOOLCHAIN:-/var/cache/sglang-deploy/cuda-13.0.88}
pins=(nvidia-cuda-nvcc==13.0.88 nvidia-cuda-crt==13.0.88 nvidia-nvvm==13.0.88 nvidia-cuda-runtime==13.0.96
      nvidia-curand==10.4.0.35)
want="${pins[*]}"
# shellcheck source=scripts/machine-cache.sh
. scripts/machine-cache.sh
cache_reuse "$dest" "$want" -x "$dest/bin/nvcc"
cache_begin "$dest"
echo "cuda toolchain: downloading nvcc 13.0.88, the 13.0.96 runtime and curand into $dest (about 160 MB, once)" >&2
"$pip" download -q --disable-pip-version-check --no-deps --only-binary=:all: -d "$fresh/wheels" "${pins[@]}" \
  2>&1 | grep -v "^WARNING: Location" >&2 || true
found=$(find "$fresh/wheels" -name '*.whl' | wc -l)
if [ "$found" -ne "${#pins[@]}" ]; then
  echo "cuda toolchain: $found wheels downloaded, ${#pins[@]} expected (${pins[*]})" >&2
  exit 1
fi
python3 - "$fresh" <<'EOF'
import glob, os, sys, zipfile

root = sys.argv[1]
for wheel in sorted(glob.glob(os.path.join(root, "wheels", "*.whl"))):
    with zipfile.ZipFile(wheel) as archive:
        for info in archive.infolist():
            if not info.filename.startswith("nvidia/cu13/"):
                continue
            path = archive.extract(info, os.path.join(root, "unpacked"))
            mode = (info.external_attr >> 16) & 0o777
            os.chmod(path, mode or 0o644)
home = os.path.join(root, "unpacked", "nvidia", "cu13")
for part in ("bin", "include", "nvvm"):
    os.symlink(os.path.join("unpacked", "nvidia", "cu13", part), os.path.join(root, part))
os.makedirs(os.path.join(root, "lib64"))
for name in os.listdir(os.path.join(home, "lib")):
    os.symlink(os.path.join("..", "unpacked", "nvidia", "cu13", "lib", name), os.path.join(root, "lib64", name))
# libcudart.so: the link-time name that NVIDIA's cuda-cudart-dev package adds (the wheel ships the soname only).
os.symlink("libcudart.so.13", os.path.join(root, "lib64", "libcudart.so"))
EOF
for tool in bin/nvcc bin/ptxas bin/fatbinary bin/nvlink bin/cudafe++ bin/bin2c nvvm/bin/cicc; do
  chmod 0755 "$fresh/$tool"
done
"$fresh/bin/nvcc" --version | grep -q "V13.0.88"
rm -rf "$fresh/wheels"
chmod 0755 "$fresh"
cache_commit "$dest" "$want"
