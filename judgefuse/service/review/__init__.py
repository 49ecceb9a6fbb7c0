"""The review loop: the queue annotators work, their page and sessions, labels, the audit plan."""
