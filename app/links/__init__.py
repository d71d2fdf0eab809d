"""Share links (issue 24): expiring, revocable, token-less links to one record or to a folder
of records (a press kit). services.py holds the rules, routes.py the API."""
