from gitwal.cli import main

main(prog_name="git wal")
