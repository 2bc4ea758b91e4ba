package audit

// ThreadRoot is where the first message of a thread of alerts went, in the
// terms of the notifier that posted it: the store keeps Destination and
// MessageID as opaque strings, so that the notifier can reply to that
// message and bring it up to date. Rows of one thread share a ThreadKey.
type ThreadRoot struct {
	Key         string `db:"thread_key"`
	Destination string `db:"channel"`
	MessageID   string `db:"ts"`
	RowID       int64  `db:"root_outbox_id"` // the outbox row that posted it
}
