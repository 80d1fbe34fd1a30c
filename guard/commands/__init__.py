"""One module per command. Each exports `run(repo, ...)`, returns a typed result (see
guard/results.py) or raises a Refusal, never prints and never imports click."""
