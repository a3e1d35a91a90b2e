import sys
from pathlib import Path

# harbor_env (this folder); serve_helpers (the FIBServe server subprocess); scripted_openai (a model endpoint).
sys.path.insert(0, str(Path(__file__).parent))
sys.path.insert(0, str(Path(__file__).parents[2] / "fibserve" / "serve"))
sys.path.insert(0, str(Path(__file__).parents[1] / "models"))
