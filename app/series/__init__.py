"""Series (issue 49): named, curated lists of records ("IAB-Forschungsbericht"), made by an
administrator; a record names its series and its number there (`series` of the record).
The series' page is app/pages/series.py, its feed the Atom feed's `series=`, its OAI-PMH set
`series~<slug>` (docs/links-and-series.md)."""
