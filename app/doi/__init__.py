"""DOIs through DataCite (issue 40, `DATACITE_*`): reserved for a record, registered, updated
and hidden as the record goes, through an outbox that no request waits on.

`lookup` is what readers of records (pages, exports, OAI-PMH, API answers) use; `services`
reserves DOIs and decides, at every write of a record, what DataCite is to hold; `worker`
brings DataCite there after the commit (its `init_app` is called by the factory); `cli` has
`flask doi work` and `flask doi status`.
"""
