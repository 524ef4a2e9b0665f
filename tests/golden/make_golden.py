"""Write the golden files that do not exist yet. Never overwrite one: they are the contract."""

import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.dirname(HERE))

from support.golden_cases import CASES, EXAMPLE_A, EXAMPLE_B  # noqa: E402

from qdbpm.pm.encoder import encode_file  # noqa: E402

files = {"example_a.pm": EXAMPLE_A, "example_b.pm": EXAMPLE_B}
files.update({f"{name}.pm": encode_file(build()) for name, build in CASES.items()})
for name, data in files.items():
    path = os.path.join(HERE, name)
    if os.path.exists(path):
        print(f"keep  {name}")
        continue
    with open(path, "wb") as f:
        f.write(data)
    print(f"wrote {name} ({len(data)} bytes)")
