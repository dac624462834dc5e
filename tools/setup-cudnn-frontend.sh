#!/bin/bash
# tools/setup-cudnn-frontend.sh [VERSION]: fetches cudnn-frontend, NVIDIA's
# header-only C++ graph API for cuDNN (PyPI package nvidia-cudnn-frontend,
# through pip), and unpacks its include/ into .deps/cudnn-frontend/include,
# where meson looks by default (-Dcudnn_frontend=DIR names another). With
# it and cuDNN 9's headers beside CUDA's, the CUDA backend runs attention on
# cuDNN's fused SDPA (docs/gpu.md). Idempotent; exits 1 (nothing changed)
# when pip cannot fetch the package.
set -euo pipefail
V=${1:-1.32.0}
root=$(cd "$(dirname "$0")/.." && pwd)
dest=$root/.deps/cudnn-frontend
if [ "$(cat "$dest/VERSION" 2>/dev/null)" = "$V" ] && [ -f "$dest/include/cudnn_frontend.h" ]; then
  echo "cudnn-frontend $V already in $dest"
  exit 0
fi
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
python3 -m pip download --quiet --no-deps --only-binary=:all: "nvidia-cudnn-frontend==$V" -d "$tmp"
python3 - "$tmp" "$dest.new" <<'PY'
import glob, sys, zipfile
whl = glob.glob(sys.argv[1] + "/*.whl")[0]
with zipfile.ZipFile(whl) as z:
    names = [n for n in z.namelist() if n.startswith("include/")]
    if not any(n.endswith("/cudnn_frontend.h") for n in names):
        sys.exit("no include/cudnn_frontend.h in " + whl)
    for n in names:
        z.extract(n, sys.argv[2])
PY
echo "$V" > "$dest.new/VERSION"
rm -rf "$dest"
mv "$dest.new" "$dest"
echo "cudnn-frontend $V in $dest/include"
