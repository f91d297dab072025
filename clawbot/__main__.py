from clawbot.cli.main import main

main()
