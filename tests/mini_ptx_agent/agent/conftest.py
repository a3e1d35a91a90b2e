import sys
from pathlib import Path

# Shared helpers: eval_reports (tests/mini_ptx_agent/eval) and scripted_model (this folder).
sys.path.insert(0, str(Path(__file__).parent))
sys.path.insert(0, str(Path(__file__).parent.parent / "eval"))
