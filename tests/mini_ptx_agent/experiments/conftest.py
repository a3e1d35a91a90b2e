import sys
from pathlib import Path

# Shared helpers: scripted_kernels (this folder); scripted_model (tests/mini_ptx_agent/agent); run_cli and
# test_turns (runs); eval_reports (eval); ray_cluster and serve_helpers (tests/fibserve/serve).
sys.path.insert(0, str(Path(__file__).parent))
sys.path.insert(0, str(Path(__file__).parent.parent / "agent"))
sys.path.insert(0, str(Path(__file__).parent.parent / "runs"))
sys.path.insert(0, str(Path(__file__).parent.parent / "eval"))
sys.path.insert(0, str(Path(__file__).parents[2] / "fibserve" / "serve"))
