"""What a running stage needs from its host, kept out of the pure ``core``: config files and
secrets (``config_io``), the /metrics web server and its TLS and basic-auth file
(``webserver``, ``webconfig``), files written whole and a full disk told in one line
(``disk``), and Maven for the pinned jars (``maven``)."""
