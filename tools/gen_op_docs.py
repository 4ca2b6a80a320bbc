"""Write docs/ops.md, the op reference, from the op registrations (autograd_gpu/ops/registry.py).

Run after adding or changing an op: ``python tools/gen_op_docs.py``; tests/test_registry.py fails while
the file is out of date."""
from pathlib import Path

import autograd_gpu  # noqa: F401  (imports every op module, so every op is registered)
from autograd_gpu.ops import registry

OUT = Path(__file__).resolve().parents[1] / "docs" / "ops.md"

if __name__ == "__main__":
    OUT.write_text(registry.docs_markdown() + "\n")
    print(f"wrote {OUT} ({len(registry.ops())} ops)")
