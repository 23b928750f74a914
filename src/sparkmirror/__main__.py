from sparkmirror.cli.main import main

main()
