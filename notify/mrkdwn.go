package notify

import (
	"regexp"
	"strings"
	"unicode/utf16"

	"github.com/retryaudit/retryaudit/audit"
)

// Slack's limits (docs.slack.dev/reference/block-kit): a message over one of
// them is refused whole with invalid_blocks. Every text is cut to its limit
// here, with a visible mark, so that no alert is lost for its size.
const (
	maxHeader     = 150  // a header block's text
	maxSection    = 3000 // a section block's text
	maxField      = 2000 // one of a section's fields
	maxFields     = 10   // fields in a section
	maxContext    = 10   // elements in a context block
	maxBlocks     = 50   // blocks in a message
	maxButtonText = 75   // a button's label
	maxButtons    = 25   // elements of an actions block
	maxURL        = 3000 // a button's URL
	maxText       = 3000 // the notification text (Slack takes more, phones show less)
)

// cut is the mark left where a text was shortened.
const cut = "…"

// length counts as Slack does at worst: in UTF-16 code units, so that an
// emoji counts two.
func length(s string) int {
	n := 0
	for _, r := range s {
		n += utf16.RuneLen(r)
	}
	return n
}

// fit cuts s to at most n UTF-16 units, ending it with "…" when it cut. It
// never cuts an escape (&amp; &lt; &gt;) in half.
func fit(s string, n int) string {
	if length(s) <= n {
		return s
	}
	room := n - length(cut)
	var b strings.Builder
	used := 0
	for _, r := range s {
		w := utf16.RuneLen(r)
		if used+w > room {
			break
		}
		b.WriteRune(r)
		used += w
	}
	out := b.String()
	if amp := strings.LastIndexByte(out, '&'); amp >= 0 && !strings.Contains(out[amp:], ";") {
		out = out[:amp]
	}
	return out + cut
}

// mentions are the words that Slack may turn into a mention of everyone in
// the channel when they follow a bare '@'.
var mentions = regexp.MustCompile(`(?i)@(here|channel|everyone)`)

// wordJoiner keeps '@' and "here" apart for Slack and together for people.
const wordJoiner = "\u2060"

// neutral takes the power to mention out of text from outside (n8n, a
// sender, a person): @here, @channel and @everyone stay readable but no
// longer notify anyone.
func neutral(s string) string {
	return mentions.ReplaceAllString(s, "@"+wordJoiner+"$1")
}

// escape makes text from outside safe for Slack's mrkdwn: &, < and > are
// its control characters (links, <!channel>, <@U123>), bare mentions are
// neutralised, and line breaks and other control characters are written
// out (audit.OneLine), so that a value never starts a line of its own: a
// workflow named "orders\n*Status*\n…" cannot forge a field. Only the
// lines this package writes break lines.
func escape(s string) string {
	return neutral(strings.NewReplacer("&", "&amp;", "<", "&lt;", ">", "&gt;").Replace(audit.OneLine(s)))
}

// plain makes text from outside safe for a plain_text object: Slack shows
// it as written, but a bare mention is still neutralised.
func plain(s string) string { return neutral(s) }
