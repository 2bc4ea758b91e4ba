package notify

import (
	"context"

	"github.com/retryaudit/retryaudit/audit"
)

// plan is what to send for a row.
type plan struct {
	msg   Message
	skip  string // why nothing is sent
	opens bool   // the message opens the row's thread
}

// linkedSince is why a group's message is not sent: each of its errors was
// linked to an event after it was recorded, and the event's thread says so.
const linkedSince = "every error of the group was linked to an event since"

// plan builds what to send for a row: the first message of a thread, a
// reply in it, or the first message brought up to date. A group's messages
// are rendered from the group's state now (how many, the last one). Without
// threads (a webhook, or a first message that never went out), a reply is
// sent as a message of its own, which names the event, and an update is
// skipped; a group's reply then opens the thread itself.
func (w *Worker) plan(ctx context.Context, row audit.OutboxRow, a audit.Alert) (plan, error) {
	if a.Kind == KindDigest {
		d, err := digestOf(row)
		if err != nil {
			return plan{skip: "the digest does not decode: " + err.Error()}, nil
		}
		return plan{msg: w.Renderer.RenderDigest(d)}, nil
	}
	if a.Group != "" {
		var err error
		if a, err = w.Store.CurrentAlert(ctx, a); err != nil {
			return plan{}, err
		}
		if a.Count == 0 {
			return plan{skip: linkedSince}, nil
		}
	}
	if row.Kind == audit.RowAlert {
		m, err := w.actions(ctx, w.Renderer.render(a, asFirst, row.ID), a)
		return plan{msg: m, opens: true}, err
	}
	thread, root, ok, err := findThread(ctx, w.Store, row.ThreadKey)
	if err != nil {
		return plan{}, err
	}
	threaded := ok && w.Notifier.Threads()
	if row.Kind == audit.RowRefresh {
		if !threaded {
			return plan{skip: "no first message to update (webhook, or it was never sent)"}, nil
		}
		if later, err := w.Store.Superseded(ctx, row); err != nil || later {
			return plan{skip: "a later update of the first message follows"}, err
		}
		current, err := w.Store.CurrentAlert(ctx, root)
		if err != nil {
			return plan{}, err
		}
		if current.Group != "" && current.Count == 0 {
			return plan{skip: linkedSince}, nil
		}
		m, err := w.actions(ctx, w.Renderer.render(current, asUpdate, thread.RootRowID), current)
		m.Channel, m.UpdateTS = thread.Channel, thread.TS
		return plan{msg: m}, err
	}
	if !threaded {
		return plan{msg: w.Renderer.render(a, asFirst, row.ID), opens: a.Group != ""}, nil
	}
	m := w.Renderer.render(a, asReply, row.ID)
	m.Channel, m.ThreadTS = thread.Channel, thread.TS
	return plan{msg: m}, nil
}
