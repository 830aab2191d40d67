"""The Stashbird service: settings, the ``stashbird`` command line and the service process."""
