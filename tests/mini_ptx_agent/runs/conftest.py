import sys
from pathlib import Path

# Shared helpers: run_cli (this folder); scripted_model and the replies of test_agent_loop (tests/mini_ptx_agent/agent).
sys.path.insert(0, str(Path(__file__).parent))
sys.path.insert(0, str(Path(__file__).parent.parent / "agent"))
