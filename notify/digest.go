package notify

import (
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/slack-go/slack"

	"github.com/retryaudit/retryaudit/audit"
)

// KindDigest is the alert kind of the daily digest's outbox row.
const KindDigest = "daily_digest"

// RowDigest is the outbox row kind of a digest: a message of its own, not
// an alert (the overview does not count it among them).
const RowDigest = "digest"

// DigestThread names the outbox thread of one day's digest.
func DigestThread(day string) string { return "digest:" + day }

// Digest is what the daily digest says: the day's numbers and what waits
// for a person, oldest first.
type Digest struct {
	Day      string    `json:"day"` // YYYY-MM-DD in the digest's time zone
	From     time.Time `json:"from"`
	To       time.Time `json:"to"`
	Events   int64     `json:"events"`   // first deliveries
	Stopped  int64     `json:"stopped"`  // duplicates told not to act
	Retries  int64     `json:"retries"`  // Retries recognised and run
	Resolved int64     `json:"resolved"` // entries resolved by people
	// Unreported are failures that reached no error workflow: recorded by
	// reconciliation from n8n's API.
	Unreported int               `json:"unreported"`
	Waiting    []audit.ReviewAge `json:"waiting,omitempty"` // the oldest, at most MaxDigestWaiting
	WaitTotal  int               `json:"wait_total"`
}

// MaxDigestWaiting is how many waiting entries the digest names.
const MaxDigestWaiting = 15

// Empty reports whether the digest has nothing to say.
func (d Digest) Empty() bool {
	return d.Events == 0 && d.Stopped == 0 && d.Retries == 0 && d.Resolved == 0 && d.Unreported == 0 &&
		d.WaitTotal == 0
}

// DigestPayload is the outbox payload of a digest: an alert of kind
// KindDigest that carries it.
func DigestPayload(d Digest, at time.Time) (string, error) {
	raw, err := json.Marshal(struct {
		audit.Alert
		Digest Digest `json:"digest"`
	}{audit.Alert{Kind: KindDigest, At: at}, d})
	return string(raw), err
}

// digestOf reads the digest an outbox row carries.
func digestOf(row audit.OutboxRow) (Digest, error) {
	var p struct {
		Digest Digest `json:"digest"`
	}
	err := json.Unmarshal([]byte(row.Payload), &p)
	return p.Digest, err
}

// RenderDigest renders the daily digest as one message: the numbers, then
// the entries waiting for a person with a link to each audit page.
func (r *Renderer) RenderDigest(d Digest) Message {
	var bs []slack.Block
	head := "retryaudit daily digest, " + d.Day
	bs = append(bs, slack.NewHeaderBlock(slack.NewTextBlockObject(slack.PlainTextType, fit(head, maxHeader), false, false)))
	var lines []string
	add := func(n int64, one, many string) {
		if n == 1 {
			lines = append(lines, "• *1* "+one)
		} else if n > 1 {
			lines = append(lines, "• *"+strconv.FormatInt(n, 10)+"* "+many)
		}
	}
	add(d.Events, "new event", "new events")
	add(d.Stopped, "duplicate stopped", "duplicates stopped")
	add(d.Retries, "retry run", "retries run")
	add(d.Resolved, "entry resolved by a person", "entries resolved by people")
	add(int64(d.Unreported), "failure that reached no error workflow (found by reconciliation or the execution hooks)",
		"failures that reached no error workflow (found by reconciliation or the execution hooks)")
	summary := "From " + d.From.Format("Mon 2 Jan 15:04") + " to " + d.To.Format("Mon 2 Jan 15:04 (-07:00)") + ":"
	if len(lines) == 0 {
		summary += " nothing new."
	} else {
		summary += "\n" + strings.Join(lines, "\n")
	}
	bs = append(bs, slack.NewSectionBlock(mrkdwn(fit(summary, maxSection)), nil, nil))
	if d.WaitTotal > 0 {
		var w []string
		w = append(w, fmt.Sprintf("*%d waiting for a person*, oldest first:", d.WaitTotal))
		for _, e := range d.Waiting {
			name := escape(fit(e.Source+" / "+e.EventID, 120))
			line := "• " + name
			if u := r.links.Event(e.Source, e.EventID); u != "" && length(u) <= maxURL {
				line = "• <" + linkURL(u) + "|" + strings.ReplaceAll(name, "|", "¦") + ">"
			}
			line += " — " + escape(strings.ReplaceAll(e.Reason, "_", " ")) + ", waiting since " +
				e.Since.In(d.To.Location()).Format("Mon 2 Jan 15:04")
			w = append(w, line)
		}
		if more := d.WaitTotal - len(d.Waiting); more > 0 {
			w = append(w, fmt.Sprintf("… and %d more", more))
		}
		if r.links.BaseURL != "" {
			w = append(w, "<"+linkURL(r.links.BaseURL+"/review")+"|Review queue>")
		}
		bs = append(bs, slack.NewSectionBlock(mrkdwn(fit(strings.Join(w, "\n"), maxSection)), nil, nil))
	}
	text := fmt.Sprintf("retryaudit daily digest %s: %d new events, %d duplicates stopped, %d waiting for a person",
		d.Day, d.Events, d.Stopped, d.WaitTotal)
	return Message{Text: fit(text, maxText), Blocks: slack.Blocks{BlockSet: bs}}
}
