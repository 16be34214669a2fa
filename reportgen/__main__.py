from reportgen.commands.cli import main

main()
