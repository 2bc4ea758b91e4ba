package notify

import "github.com/retryaudit/retryaudit/audit"

// RenderRow renders an alert as the first message of its thread, sent for
// outbox row row: its short audit link is /e/{row}.
func (r *Renderer) RenderRow(a audit.Alert, row int64) Message { return r.render(a, asFirst, row) }
