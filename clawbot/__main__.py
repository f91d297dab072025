from clawbot.cli import main

main()
