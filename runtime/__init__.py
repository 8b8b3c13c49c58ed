"""What a running stage needs from its host, kept out of the pure ``core``: config files and
secrets (``config_io``), the /metrics web server and its TLS and basic-auth file
(``webserver``, ``webconfig``), and Maven for the pinned jars (``maven``)."""
