import sys
from pathlib import Path

# Shared helpers: inspect_inputs (this folder); scripted_model and the replies of test_agent_loop (agent);
# CannedBackend of test_turns (runs); eval_reports (eval); scripted_kernels (experiments); scripted_teachers (data).
sys.path.insert(0, str(Path(__file__).parent))
for folder in ("agent", "runs", "eval", "experiments", "data"):
    sys.path.insert(0, str(Path(__file__).parent.parent / folder))
