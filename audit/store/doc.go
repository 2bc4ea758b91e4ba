// Package store keeps the audit domain in PostgreSQL or SQLite: the ledger
// and its conditional transitions, executions and lineage, n8n's errors, the
// outbox of alerts written in the same transaction as what they report, the
// review queue, the counters of the overview and the background jobs'
// leases.
//
// Every public method that writes opens its own transaction. Claims and
// outcome reports are committed together (group commit): while one batch
// commits, the next collects what has arrived, and each request gets the
// answer it would have got alone.
//
// The store's statements are named and kept a file a table (sql/events.sql,
// sql/outbox.sql, …), entity first (EventList, OutboxLease): in this
// package's sql/ where both databases agree, in each driver's sql/ where
// they differ (the ledger's LedgerLock and LedgerWrite among them). Each
// table of the ledger has one Go row type (rows.go), which every read of
// the table's rows scans into (counts by a column aside) and the ledger's
// row sets are written from. What else differs between the databases is
// behind driver.Driver, with one implementation per database (packages
// postgres and sqlite).
package store
