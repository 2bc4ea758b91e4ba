// Package notify tells people about alerts: it renders them as Slack
// messages, sends them through the Slack Web API or an incoming webhook,
// and drains the outbox the store writes them to.
package notify

import (
	"bytes"
	"cmp"
	"encoding/json"
	"fmt"
	"io/fs"
	"strings"
	"text/template"
	"time"

	"github.com/slack-go/slack"

	"github.com/retryaudit/retryaudit/audit"
)

// Message is one Slack message to send.
type Message struct {
	Text     string // the fallback notifications show; it names the event
	Blocks   slack.Blocks
	ThreadTS string // reply in this thread
	UpdateTS string // rewrite this message instead of posting
	Channel  string // the thread's or message's channel; "" is the configured one
}

// Renderer turns alerts into messages with the template in
// templates/slack/alert.json.tmpl.
type Renderer struct {
	tmpl  *template.Template
	links audit.Links
	now   func() time.Time
}

// NewRenderer parses the template and renders a sample of every kind of
// alert, so that a broken template stops the start, not the first alert.
func NewRenderer(fsys fs.FS, links audit.Links, now func() time.Time) (*Renderer, error) {
	if now == nil {
		now = time.Now
	}
	t, err := template.New("alert.json.tmpl").Funcs(template.FuncMap{
		"json":   func(s string) (string, error) { b, err := json.Marshal(s); return string(b), err },
		"mrkdwn": escape,
	}).ParseFS(fsys, "slack/alert.json.tmpl")
	if err != nil {
		return nil, fmt.Errorf("notify: parse the Slack template: %w", err)
	}
	r := &Renderer{tmpl: t, links: links, now: now}
	at := now()
	for _, kind := range []string{audit.AlertExecutionError, audit.AlertUnlinkedError, audit.AlertUnknown,
		audit.AlertStale, audit.AlertFingerprint, audit.AlertNews, "test"} {
		a := audit.Alert{Kind: kind, Source: "shop", EventID: "order-1042 <&>", Status: audit.StatusProcessing,
			Since: at.Add(-time.Hour), ExecutionID: "4711", Message: "sample \"message\" <b>", News: audit.KindClaim, At: at}
		for _, mode := range []mode{asFirst, asReply, asUpdate} {
			if _, err := r.render(a, mode); err != nil {
				return nil, fmt.Errorf("notify: the Slack template does not render a %s alert: %w", kind, err)
			}
		}
	}
	return r, nil
}

// mode is how a message stands in its thread.
type mode int

const (
	asFirst  mode = iota // the first message of a thread
	asReply              // a reply in the thread
	asUpdate             // the first message, rewritten to the current state
)

type field struct{ Label, Value string }

type button struct{ Text, URL string }

// view is what the template sees.
type view struct {
	Kind, Subject, Source, EventID, Item, Status string
	Workflow, Node, ExecutionID, RetryOf         string
	ErrorID                                      int64
	Deliveries                                   int
	Processing, Message, Short, News, NewsTitle  string
	Resolution, At, Headline                     string
	AuditURL, N8NURL, CRMURL                     string
	Reply, Updated                               bool
	Fields                                       []field
	Buttons                                      []button
}

// Render renders an alert as the first message of its thread.
func (r *Renderer) Render(a audit.Alert) (Message, error) { return r.render(a, asFirst) }

func (r *Renderer) render(a audit.Alert, m mode) (Message, error) {
	v := r.view(a, m)
	var head bytes.Buffer
	if err := r.tmpl.ExecuteTemplate(&head, "headline", v); err != nil {
		return Message{}, err
	}
	v.Headline = audit.Truncate(strings.TrimSpace(head.String()), 150) // Slack's limit for a header
	var text, blocks bytes.Buffer
	if err := r.tmpl.ExecuteTemplate(&text, "text", v); err != nil {
		return Message{}, err
	}
	if err := r.tmpl.ExecuteTemplate(&blocks, "blocks", v); err != nil {
		return Message{}, err
	}
	var msg Message
	if err := json.Unmarshal(blocks.Bytes(), &msg.Blocks); err != nil {
		return Message{}, fmt.Errorf("the blocks are not valid Block Kit JSON: %w", err)
	}
	msg.Text = audit.Truncate(strings.TrimSpace(text.String()), 3000)
	return msg, nil
}

func (r *Renderer) view(a audit.Alert, m mode) view {
	v := view{
		Kind: a.Kind, Source: a.Source, EventID: a.EventID, Item: a.Item, Status: string(a.Status),
		Workflow: cmp.Or(a.WorkflowName, a.WorkflowID), Node: a.Node, ExecutionID: a.ExecutionID,
		RetryOf: a.RetryOf, ErrorID: a.ErrorID, Deliveries: a.Deliveries,
		Message: escape(audit.Truncate(a.Message, 500)), Short: escape(audit.Truncate(a.Message, 150)),
		Reply: m == asReply, Updated: m == asUpdate, At: a.At.UTC().Format("2006-01-02 15:04:05 UTC"),
	}
	switch {
	case a.HasEvent():
		v.Subject = a.Source + " / " + a.EventID
		if a.Item != "" {
			v.Subject += " / " + a.Item
		}
		v.AuditURL = r.links.Event(a.Source, a.EventID)
		v.CRMURL = r.links.CRMOrder(a.Source, a.EventID, a.Item, a.CRMRef)
	case a.ErrorID != 0:
		v.Subject = fmt.Sprintf("error #%d", a.ErrorID)
		v.AuditURL = r.links.Error(a.ErrorID)
	}
	v.N8NURL = r.links.N8NExecution(a.WorkflowID, a.ExecutionID, a.N8NURL)
	if a.Status == audit.StatusProcessing && !a.Since.IsZero() {
		v.Processing = audit.HumanDuration(r.now().Sub(a.Since), "")
	}
	v.NewsTitle, v.News = news(a)
	if a.Resolution != "" {
		v.Resolution = escape(a.Resolution)
	}
	v.Fields = fields(a, v)
	for _, b := range []button{{"Audit row", v.AuditURL}, {"n8n execution", v.N8NURL}, {"CRM order", v.CRMURL}} {
		if b.URL != "" {
			v.Buttons = append(v.Buttons, b)
		}
	}
	return v
}

func fields(a audit.Alert, v view) []field {
	var out []field
	add := func(label, value string) {
		if value != "" {
			out = append(out, field{label, escape(audit.Truncate(value, 200))})
		}
	}
	add("Source", a.Source)
	add("Event ID", a.EventID)
	add("Item", a.Item)
	add("Status", string(a.Status))
	if a.ErrorKind != "" {
		add("Kind", a.ErrorKind)
	}
	add("Workflow", v.Workflow)
	add("Failed node", a.Node)
	add("Execution", a.ExecutionID)
	add("Retry of", a.RetryOf)
	if a.Deliveries > 0 {
		add("Deliveries", fmt.Sprint(a.Deliveries))
	}
	add("Processing for", v.Processing)
	if len(out) > 10 { // Slack's limit for a section's fields
		out = out[:10]
	}
	return out
}

// news says what a follow-up reports: a short title and a sentence.
func news(a audit.Alert) (string, string) {
	who := escape(a.ExecutionID)
	switch a.News {
	case audit.KindClaim:
		switch a.Delivery {
		case string(audit.DeliveryManualRetry):
			return "manual retry", fmt.Sprintf("execution %s, a retry of %s, presented it: *%s*", who, escape(a.RetryOf), a.Decision)
		}
		return "redelivery", fmt.Sprintf("execution %s presented it again: *%s*", who, a.Decision)
	case audit.KindError:
		return "new error", fmt.Sprintf("execution %s failed in %s", who, escape(cmp.Or(a.Node, "an unnamed node")))
	case audit.KindOutcome:
		return "outcome " + a.Decision, fmt.Sprintf("reported *%s*", escape(a.Message))
	case audit.KindResolution:
		return "resolved " + a.Decision, fmt.Sprintf("*%s* by %s", a.Decision, escape(a.Actor))
	case audit.KindStale:
		return "stale", "still processing without an outcome"
	case audit.KindFingerprint:
		return "fingerprint mismatch", "a delivery brought another fingerprint"
	}
	return a.News, escape(a.Message)
}

// escape makes text safe for Slack's mrkdwn: &, < and > are its control
// characters (links, mentions).
func escape(s string) string {
	return strings.NewReplacer("&", "&amp;", "<", "&lt;", ">", "&gt;").Replace(s)
}
