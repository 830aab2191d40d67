"""One module per ``stashbird`` command."""
