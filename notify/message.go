// Package notify tells people about alerts: it renders them as Slack
// messages, sends them through the Slack Web API or an incoming webhook,
// and drains the outbox the store writes them to.
package notify

import (
	"cmp"
	"fmt"
	"net/url"
	"strconv"
	"strings"
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
	// Metadata marks the message as the outbox row's, so that it can be
	// found in the channel's history after an answer that never came.
	Metadata *slack.SlackMetadata
}

// Renderer turns alerts into Block Kit messages, built with slack-go's
// block types and bounded to Slack's limits. The wording is in wording.go.
type Renderer struct {
	links audit.Links
	now   func() time.Time
	// Actions says which buttons act on an entry from a bot's message.
	Actions ActionButtons
}

// NewRenderer returns a renderer whose links follow links; now is the clock
// for "processing for" (time.Now when nil).
func NewRenderer(links audit.Links, now func() time.Time) *Renderer {
	if now == nil {
		now = time.Now
	}
	return &Renderer{links: links, now: now}
}

// mode is how a message stands in its thread.
type mode int

const (
	asFirst  mode = iota // the first message of a thread
	asReply              // a reply in the thread
	asUpdate             // the first message, rewritten to the current state
)

// field is a label and a value, the value escaped for mrkdwn.
type field struct{ label, value string }

type button struct{ id, text, url string }

// card is what a message says, before it is cut to Slack's limits.
type card struct {
	headline   string // plain
	summary    string // mrkdwn
	fields     []field
	message    string // plain
	resolution string // plain
	context    []string
	buttons    []button
	text       string // mrkdwn: the notification
}

// Render renders an alert as the first message of its thread.
func (r *Renderer) Render(a audit.Alert) Message { return r.render(a, asFirst, 0) }

// render renders an alert; row is its outbox row, for the short audit link
// of an event whose id makes the long one too long for Slack.
func (r *Renderer) render(a audit.Alert, m mode, row int64) Message {
	c := card{headline: headline(a, m), message: plain(a.Message)}
	subj := subject(a)
	switch {
	case m == asReply && a.Group != "":
		c.summary = escape(subj) + " — " + groupCount(a)
	case m == asReply:
		_, c.summary = news(a)
		c.summary = escape(subj) + " — " + c.summary
	case a.Group != "":
		c.summary = "*" + groupCount(a) + "*"
		c.fields = r.groupFields(a)
	default:
		c.fields = r.fields(a)
	}
	if a.Resolution != "" {
		c.resolution = plain(a.Resolution)
	}
	c.context = []string{escape(stamp(a.At))}
	if u, host := r.payloadLink(a); u != "" {
		c.context = append(c.context, payloadLinkMrkdwn(host, u))
	}
	var notes []string
	c.buttons, notes = r.buttons(a, row)
	c.context = append(c.context, notes...)
	c.text = escape(c.headline + ": " + subj)
	switch {
	case m == asReply && a.Group != "":
		c.text += " — " + groupCount(a)
	case m == asReply:
		_, n := news(a)
		c.text += " — " + n
	case a.Group != "":
		c.text += ": " + groupCount(a)
	}
	if a.Message != "" {
		c.text += ": " + escape(fit(a.Message, 150))
	}
	return Message{Text: fit(c.text, maxText), Blocks: c.blocks()}
}

func (r *Renderer) fields(a audit.Alert) []field {
	var out []field
	add := func(label, value string) {
		if value != "" {
			out = append(out, field{label, escape(value)})
		}
	}
	add(labelSource, a.Source)
	add(labelEventID, a.EventID)
	add(labelItem, a.Item)
	add(labelStatus, string(a.Status))
	add(labelKind, a.ErrorKind)
	add(labelWorkflow, cmp.Or(a.WorkflowName, a.WorkflowID))
	add(labelNode, a.Node)
	add(labelExecution, a.ExecutionID)
	add(labelRetryOf, a.RetryOf)
	if a.Deliveries > 0 {
		add(labelDeliveries, strconv.Itoa(a.Deliveries))
	}
	if a.Status == audit.StatusProcessing && !a.Since.IsZero() {
		add(labelProcessing, audit.HumanDuration(r.now().Sub(a.Since), " "))
	}
	return out
}

func (r *Renderer) groupFields(a audit.Alert) []field {
	var out []field
	add := func(label, value string) {
		if value != "" {
			out = append(out, field{label, escape(value)})
		}
	}
	add(labelWorkflow, cmp.Or(a.WorkflowName, a.WorkflowID))
	add(labelNode, a.Node)
	add(labelKind, a.ErrorKind)
	add(labelFailures, strconv.Itoa(max(a.Count, 1)))
	add(labelLastExec, a.ExecutionID)
	return out
}

// buttons links the audit row, n8n's execution (only through the editor URL
// the configuration names) and the CRM's order. A link too long for a
// button is replaced by a short one when the service can redirect it;
// otherwise it is left out and a note in the footer says so.
func (r *Renderer) buttons(a audit.Alert, row int64) ([]button, []string) {
	var out []button
	var notes []string
	add := func(id, text, u, where string) {
		switch {
		case u == "":
		case length(u) > maxURL:
			notes = append(notes, linkTooLongMrkdwn(text, where))
		default:
			out = append(out, button{id, text, u})
		}
	}
	switch {
	case a.Kind == kindTest:
	case a.HasEvent():
		u := r.links.Event(a.Source, a.EventID)
		if length(u) > maxURL && row > 0 {
			u = r.shortLink(row)
		}
		add("audit", buttonAudit, u, whereEvent)
	case a.ErrorID != 0:
		add("audit", buttonAudit, r.links.Error(a.ErrorID), whereEvent)
	case a.Kind == audit.AlertIDReset:
		add("audit", buttonAudit, r.links.Execution(a.ExecutionID), whereEvent)
	}
	add("n8n", buttonN8N, r.editorLink(a), whereAuditRow)
	if a.HasEvent() && a.Kind != kindTest {
		add("crm", buttonCRM, r.links.CRMOrder(a.Source, a.EventID, a.Item, a.CRMRef), whereAuditRow)
	}
	return out, notes
}

// shortLink is the audit page of an outbox row's event, by the row's id:
// GET /e/{id} redirects to it (after sign-in, like every page).
func (r *Renderer) shortLink(row int64) string {
	return r.links.BaseURL + "/e/" + strconv.FormatInt(row, 10)
}

// editorLink is the execution's page in n8n's editor, built from the
// editor URL configured for its instance only.
func (r *Renderer) editorLink(a audit.Alert) string {
	if r.links.Editor(a.ExecutionID) == "" {
		return ""
	}
	return r.links.N8NExecution(a.WorkflowID, a.ExecutionID)
}

// payloadLink returns the URL the error payload carried, and its host, when
// no link can be built from the configured editor URL (none is set, or the
// payload names no workflow).
func (r *Renderer) payloadLink(a audit.Alert) (string, string) {
	if r.editorLink(a) != "" || a.N8NURL == "" {
		return "", ""
	}
	u, err := url.Parse(a.N8NURL)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return "", ""
	}
	return fit(a.N8NURL, 500), u.Host
}

// blocks builds the Block Kit of a card, every text cut to its limit.
func (c card) blocks() slack.Blocks {
	var bs []slack.Block
	bs = append(bs, slack.NewHeaderBlock(slack.NewTextBlockObject(slack.PlainTextType, fit(c.headline, maxHeader), false, false)))
	if c.summary != "" {
		bs = append(bs, slack.NewSectionBlock(mrkdwn(fit(c.summary, maxSection)), nil, nil))
	}
	if len(c.fields) > 0 {
		texts := make([]string, len(c.fields))
		for i, f := range c.fields {
			texts[i] = "*" + f.label + "*\n" + f.value
		}
		var fs []*slack.TextBlockObject
		for _, t := range fold(texts, maxFields, maxField) {
			fs = append(fs, mrkdwn(t))
		}
		bs = append(bs, slack.NewSectionBlock(nil, fs, nil))
	}
	for _, s := range []string{c.message, c.resolution} {
		if s != "" {
			bs = append(bs, slack.NewSectionBlock(slack.NewTextBlockObject(slack.PlainTextType, fit(s, maxSection), false, false), nil, nil))
		}
	}
	var ctx []slack.MixedElement
	for _, s := range fold(c.context, maxContext, maxField) {
		ctx = append(ctx, mrkdwn(s))
	}
	bs = append(bs, slack.NewContextBlock("", ctx...))
	if len(c.buttons) > 0 {
		var els []slack.BlockElement
		for _, b := range c.buttons[:min(len(c.buttons), maxButtons)] {
			btn := slack.NewButtonBlockElement("open_"+b.id, "", slack.NewTextBlockObject(slack.PlainTextType, fit(b.text, maxButtonText), false, false))
			els = append(els, btn.WithURL(b.url))
		}
		bs = append(bs, slack.NewActionBlock("", els...))
	}
	if len(bs) > maxBlocks {
		bs = append(bs[:maxBlocks-1], slack.NewContextBlock("", mrkdwn(fmt.Sprintf("%s %d more blocks left out", cut, len(bs)-maxBlocks+1))))
	}
	return slack.Blocks{BlockSet: bs}
}

// fold keeps texts to at most n elements of at most size each, as Slack
// allows in a section's fields or a context block: the texts past the
// n-1st share the last element, one a line, each cut to its share of it,
// so that every one of them still shows at least its beginning.
func fold(texts []string, n, size int) []string {
	out := make([]string, 0, min(len(texts), n))
	for _, t := range texts[:min(len(texts), n-1)] {
		out = append(out, fit(t, size))
	}
	if rest := texts[len(out):]; len(rest) > 0 {
		share := (size - len(rest) + 1) / len(rest) // the newlines between them take the rest
		parts := make([]string, len(rest))
		for i, t := range rest {
			parts[i] = fit(t, share)
		}
		out = append(out, strings.Join(parts, "\n"))
	}
	return out
}

// mrkdwn is a mrkdwn text object taken verbatim: Slack neither links URLs
// nor names of channels in it, so that only the links we build are links.
func mrkdwn(s string) *slack.TextBlockObject {
	return slack.NewTextBlockObject(slack.MarkdownType, s, false, true)
}

// linkURL makes a URL safe inside a mrkdwn link, <url|label>.
func linkURL(u string) string {
	return strings.NewReplacer("|", "%7C", "<", "%3C", ">", "%3E").Replace(u)
}

// fallback is the minimal message sent when Slack refused the full one: the
// source, the event id and the audit link, as text.
func (r *Renderer) fallback(a audit.Alert, row int64) Message {
	var link string
	switch {
	case a.HasEvent() && row > 0:
		link = r.shortLink(row)
	case a.HasEvent():
		link = r.links.Event(a.Source, a.EventID)
	case a.ErrorID != 0:
		link = r.links.Error(a.ErrorID)
	}
	if length(link) > maxURL {
		link = ""
	}
	return Message{Text: fit(fallbackMrkdwn(a, link), maxText)}
}
