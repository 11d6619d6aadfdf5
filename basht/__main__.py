"""`python -m basht ...` runs the same CLI as `basht ...`."""

from basht.cli import main

if __name__ == "__main__":
    main()
