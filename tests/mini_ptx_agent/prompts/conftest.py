"""tests/mini_ptx_agent/prompts: its helper module (prompt_builds) is importable because pytest's default
``prepend`` import mode puts this directory on ``sys.path`` before it imports the tests here."""
