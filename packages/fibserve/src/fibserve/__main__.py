from fibserve.cli import main

main()
