from onboard.cli import main

main()
