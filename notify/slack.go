package notify

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/slack-go/slack"
)

// Posted says where a message went.
type Posted struct{ Channel, TS string }

// Notifier sends one message. On failure, retry says whether another
// attempt may succeed (transport errors, 5xx, rate limits) or not (a bad
// token, an unknown channel); RetryAfter(err) says how long Slack asked to
// wait, MaybeSent(err) whether Slack may have posted it all the same.
// Errors never hold a token or a webhook URL.
type Notifier interface {
	Notify(ctx context.Context, m Message) (p Posted, retry bool, err error)
	// Threads reports whether the notifier can reply in threads and update
	// messages (the Web API can, an incoming webhook cannot).
	Threads() bool
	// Name names the destination for logs, without secrets.
	Name() string
	// Channel names the channel a message without one goes to, for the
	// pacing every instance shares.
	Channel() string
}

// Finder looks for a message in its channel's history: after an attempt
// whose answer never came, a message found there is not posted again.
type Finder interface {
	// Find looks for a message with m's metadata posted since since (in
	// m's thread when it is a reply). It returns ErrNoHistory when the
	// token may not read the channel's history, and an error matching
	// ErrCannotLook when the lookup fails for another reason that will not
	// pass by itself.
	Find(ctx context.Context, m Message, since time.Time) (Posted, bool, error)
}

// ErrNoHistory means the bot token lacks the scope to read the channel's
// history (channels:history for a public channel, groups:history for a
// private one).
var ErrNoHistory = errors.New("slack: the token may not read the channel's history (add channels:history or groups:history)")

// ErrCannotLook means the history lookup fails for a reason that will not
// pass by itself (the bot is not in the channel, the channel is unknown,
// the token is refused): retrying the lookup would hold the message back
// for good. Errors matching it say what to fix.
var ErrCannotLook = errors.New("slack: the channel's history cannot be read")

// lookupError is a lookup that cannot answer until someone changes
// something; fix says what.
type lookupError struct{ reason, fix string }

func (e *lookupError) Error() string {
	return "slack: the channel's history cannot be read (" + e.reason + "): " + e.fix
}

func (e *lookupError) Is(target error) bool { return target == ErrCannotLook }

// lookupFixes say what cures a lookup Slack refuses, by its error code.
var lookupFixes = map[string]string{
	"not_in_channel":    "invite the bot into the channel (/invite @your-bot in RETRYAUDIT_SLACK_CHANNEL)",
	"channel_not_found": "check RETRYAUDIT_SLACK_CHANNEL (a channel id such as C0123456789) and invite the bot into it",
	"invalid_auth":      "check RETRYAUDIT_SLACK_BOT_TOKEN: Slack refuses it",
	"not_authed":        "check RETRYAUDIT_SLACK_BOT_TOKEN: Slack refuses it",
	"token_revoked":     "RETRYAUDIT_SLACK_BOT_TOKEN was revoked: install the app again and set the new token",
	"token_expired":     "RETRYAUDIT_SLACK_BOT_TOKEN expired: set a new token",
	"account_inactive":  "the bot's account is deactivated: install the app again and set the new token",
	"invalid_token":     "check RETRYAUDIT_SLACK_BOT_TOKEN: Slack refuses it",
	"is_archived":       "the channel is archived: unarchive it or set another RETRYAUDIT_SLACK_CHANNEL",
}

// cannotLook turns a lookup error that a retry cannot cure into a
// lookupError naming the fix; other errors are returned as they are.
func cannotLook(err error, clean error, retry bool) error {
	if retry {
		return clean
	}
	var api slack.SlackErrorResponse
	if errors.As(err, &api) {
		fix, ok := lookupFixes[api.Err]
		if !ok {
			fix = "Slack refuses to list the channel's messages"
		}
		return &lookupError{reason: api.Err, fix: fix}
	}
	return &lookupError{reason: strings.TrimPrefix(clean.Error(), "slack: "), fix: "check RETRYAUDIT_SLACK_API_URL and the token"}
}

// BotConfig configures a Bot.
type BotConfig struct {
	Token   string
	Channel string // a channel id, such as C0123456789
	APIURL  string // replaces https://slack.com/api/ (tests, proxies)
	Timeout time.Duration
}

// DefaultTimeout bounds one call to Slack.
const DefaultTimeout = 15 * time.Second

// Bot sends with the Web API: chat.postMessage and chat.update.
type Bot struct {
	client  *slack.Client
	channel string
	token   string
	timeout time.Duration
}

// NewBot returns a notifier posting to a channel with a bot token.
func NewBot(c BotConfig) *Bot {
	timeout := cmp.Or(c.Timeout, DefaultTimeout)
	opts := []slack.Option{slack.OptionHTTPClient(&http.Client{Timeout: timeout, CheckRedirect: sameOrigin})}
	if c.APIURL != "" {
		opts = append(opts, slack.OptionAPIURL(strings.TrimRight(c.APIURL, "/")+"/"))
	}
	return &Bot{client: slack.New(c.Token, opts...), channel: c.Channel, token: c.Token, timeout: timeout}
}

// Threads reports true: the Web API replies in threads and updates messages.
func (b *Bot) Threads() bool { return true }

// Name names the channel.
func (b *Bot) Name() string { return "channel " + b.channel }

// Channel returns the configured channel.
func (b *Bot) Channel() string { return b.channel }

// Notify posts m, replies in its thread, or updates the message it names.
// The message is posted with its metadata and without unfurling links.
func (b *Bot) Notify(ctx context.Context, m Message) (Posted, bool, error) {
	channel := cmp.Or(m.Channel, b.channel)
	opts := []slack.MsgOption{slack.MsgOptionText(m.Text, false), slack.MsgOptionDisableLinkUnfurl(),
		slack.MsgOptionDisableMediaUnfurl()}
	if len(m.Blocks.BlockSet) > 0 {
		opts = append(opts, slack.MsgOptionBlocks(m.Blocks.BlockSet...))
	}
	if m.Metadata != nil {
		opts = append(opts, slack.MsgOptionMetadata(*m.Metadata))
	}
	var ch, ts string
	var err error
	if m.UpdateTS != "" {
		ch, ts, _, err = b.client.UpdateMessageContext(ctx, channel, m.UpdateTS, opts...)
	} else {
		if m.ThreadTS != "" {
			opts = append(opts, slack.MsgOptionTS(m.ThreadTS))
		}
		ch, ts, err = b.client.PostMessageContext(ctx, channel, opts...)
	}
	if err != nil {
		retry, clean := classify(err, b.token)
		return Posted{}, retry, clean
	}
	return Posted{Channel: ch, TS: ts}, false, nil
}

// historyPages bounds a search of the history: 1,000 messages since the
// first attempt, in a channel busier than that the message is not looked for
// further and is posted again.
const historyPages = 5

// Find looks for a message carrying m's metadata since since, with
// conversations.history (or conversations.replies for a reply) and
// include_all_metadata.
func (b *Bot) Find(ctx context.Context, m Message, since time.Time) (Posted, bool, error) {
	if m.Metadata == nil {
		return Posted{}, false, nil
	}
	channel := cmp.Or(m.Channel, b.channel)
	// Slack's clock and ours may differ a little.
	oldest := strconv.FormatFloat(float64(since.Add(-time.Minute).UnixMicro())/1e6, 'f', 6, 64)
	cursor := ""
	for page := 0; page < historyPages; page++ {
		var msgs []slack.Message
		var err error
		if m.ThreadTS != "" {
			msgs, _, cursor, err = b.client.GetConversationRepliesContext(ctx, &slack.GetConversationRepliesParameters{
				ChannelID: channel, Timestamp: m.ThreadTS, Oldest: oldest, Cursor: cursor, Limit: 200,
				IncludeAllMetadata: true})
		} else {
			var r *slack.GetConversationHistoryResponse
			r, err = b.client.GetConversationHistoryContext(ctx, &slack.GetConversationHistoryParameters{
				ChannelID: channel, Oldest: oldest, Cursor: cursor, Limit: 200, IncludeAllMetadata: true})
			if r != nil {
				msgs, cursor = r.Messages, r.ResponseMetaData.NextCursor
			}
		}
		if err != nil {
			var api slack.SlackErrorResponse
			if errors.As(err, &api) && (api.Err == "missing_scope" || api.Err == "not_allowed_token_type") {
				return Posted{}, false, ErrNoHistory
			}
			retry, clean := classify(err, b.token)
			return Posted{}, false, cannotLook(err, clean, retry)
		}
		for _, msg := range msgs {
			if sameMetadata(msg.Metadata, *m.Metadata) {
				return Posted{Channel: channel, TS: msg.Timestamp}, true, nil
			}
		}
		if cursor == "" {
			break
		}
	}
	return Posted{}, false, nil
}

func sameMetadata(got, want slack.SlackMetadata) bool {
	if got.EventType != want.EventType || len(want.EventPayload) == 0 {
		return false
	}
	for k, v := range want.EventPayload {
		if fmt.Sprint(got.EventPayload[k]) != fmt.Sprint(v) {
			return false
		}
	}
	return true
}

// AuthInfo is what auth.test says about the token.
type AuthInfo struct {
	Who    string   // "bot in Team"
	Scopes []string // the token's OAuth scopes, from the X-OAuth-Scopes header
}

// CanReadHistory reports whether the scopes let the bot look for a message
// in its channel's history.
func (i AuthInfo) CanReadHistory() bool {
	for _, s := range i.Scopes {
		if s == "channels:history" || s == "groups:history" {
			return true
		}
	}
	return false
}

// AuthTest asks Slack who the token belongs to and what it may do
// (auth.test).
func (b *Bot) AuthTest(ctx context.Context) (AuthInfo, error) {
	r, err := b.client.AuthTestContext(ctx)
	if err != nil {
		_, clean := classify(err, b.token)
		return AuthInfo{}, clean
	}
	info := AuthInfo{Who: r.User + " in " + r.Team}
	for _, s := range strings.Split(r.Header.Get("X-OAuth-Scopes"), ",") {
		if s = strings.TrimSpace(s); s != "" {
			info.Scopes = append(info.Scopes, s)
		}
	}
	return info, nil
}

// Ephemeral shows text to one user in a channel, and to nobody else
// (chat.postEphemeral): the answer to a button pressed on an alert. The
// text is escaped: what a CRM or n8n said mentions nobody and links
// nowhere.
func (b *Bot) Ephemeral(ctx context.Context, channel, user, text string) error {
	ctx, cancel := context.WithTimeout(ctx, b.timeout)
	defer cancel()
	_, err := b.client.PostEphemeralContext(ctx, channel, user, slack.MsgOptionText(fit(text, maxText), true))
	if err != nil {
		_, clean := classify(err, b.token)
		return clean
	}
	return nil
}

// sameOrigin follows a redirect only to the scheme, host and port the
// request went to: the token it carries goes nowhere else.
func sameOrigin(req *http.Request, via []*http.Request) error {
	if len(via) == 0 {
		return nil
	}
	if req.URL.Scheme != via[0].URL.Scheme || req.URL.Host != via[0].URL.Host {
		return errors.New("slack: refused to follow a redirect to another address")
	}
	if len(via) > 5 {
		return errors.New("slack: stopped after 5 redirects")
	}
	return nil
}
