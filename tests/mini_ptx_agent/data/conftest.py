import sys
from pathlib import Path

# Shared helpers: scripted_teachers (this folder); scripted_kernels (experiments); scripted_model (agent);
# test_agent_loop (agent, the kernels); run_cli (runs); eval_reports (eval).
sys.path.insert(0, str(Path(__file__).parent))
sys.path.insert(0, str(Path(__file__).parent.parent / "experiments"))
sys.path.insert(0, str(Path(__file__).parent.parent / "agent"))
sys.path.insert(0, str(Path(__file__).parent.parent / "runs"))
sys.path.insert(0, str(Path(__file__).parent.parent / "eval"))
