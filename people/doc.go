// Package people is what people do beside the ledger's transitions: CRM
// lookups run by the service for a person (Lookups), and the log of who did
// what (Note writes an action that touches no entry, Log reads every
// person's action). Its tables' statements run on the store's database
// handle, named, on SQLite and PostgreSQL alike.
package people

// Who is the person acting and how: Via is audit.ViaPage, ViaAPI or
// ViaSlack.
type Who struct {
	Name string
	Via  string
}
