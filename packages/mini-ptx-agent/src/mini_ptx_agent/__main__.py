from mini_ptx_agent.cli import main

main()
