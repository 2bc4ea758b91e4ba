package main

import (
	"regexp"
	"strings"
	"time"
)

// slackSettings are the settings of the actions from Slack and of the
// daily digest.
type slackSettings struct {
	// SlackSigningSecret checks POST /slack/interactions; SlackAppToken
	// opens a Socket Mode connection. Either takes button presses.
	SlackSigningSecret string
	SlackAppToken      string
	// SlackUsers maps a Slack user id to one of the pages' people.
	SlackUsers map[string]string

	// DigestAt is the time of day of the digest (DigestOn false: none),
	// in DigestTZ.
	DigestOn bool
	DigestAt time.Duration // since midnight
	DigestTZ *time.Location
}

// SlackActions reports whether button presses are taken.
func (s slackSettings) SlackActions() bool {
	return s.SlackSigningSecret != "" || s.SlackAppToken != ""
}

var slackUserID = regexp.MustCompile(`^[UW][A-Z0-9]{2,30}$`)

// slackSettings reads the actions' and the digest's variables; c holds
// the rest of the configuration, read already.
func (e *envReader) slackSettings(c config) slackSettings {
	s := slackSettings{
		SlackSigningSecret: e.secret("RETRYAUDIT_SLACK_SIGNING_SECRET"),
		SlackAppToken:      e.secret("RETRYAUDIT_SLACK_APP_TOKEN"),
	}
	if s.SlackAppToken != "" && !strings.HasPrefix(s.SlackAppToken, "xapp-") {
		e.fail("RETRYAUDIT_SLACK_APP_TOKEN", "is not an app-level token (xapp-…, with connections:write)")
	}
	if s.SlackActions() && c.SlackBotToken == "" {
		e.fail("RETRYAUDIT_SLACK_BOT_TOKEN", "required with RETRYAUDIT_SLACK_SIGNING_SECRET or RETRYAUDIT_SLACK_APP_TOKEN: "+
			"only the bot's messages carry buttons (an incoming webhook's cannot), and the bot answers the presses")
	}
	s.SlackUsers = e.slackUsers(c)
	switch {
	case s.SlackActions() && len(s.SlackUsers) == 0:
		e.fail("RETRYAUDIT_SLACK_USERS", "required with RETRYAUDIT_SLACK_SIGNING_SECRET or RETRYAUDIT_SLACK_APP_TOKEN: "+
			"the Slack users who may act (SlackUserID=name,…)")
	case !s.SlackActions() && len(s.SlackUsers) > 0:
		e.fail("RETRYAUDIT_SLACK_USERS", "has no use without RETRYAUDIT_SLACK_SIGNING_SECRET or RETRYAUDIT_SLACK_APP_TOKEN")
	}
	if at := e.str("RETRYAUDIT_DIGEST_AT", ""); at != "" {
		t, err := time.Parse("15:04", at)
		if err != nil {
			e.fail("RETRYAUDIT_DIGEST_AT", "%q is not a time of day HH:MM (such as 08:30)", at)
		}
		s.DigestOn, s.DigestAt = true, time.Duration(t.Hour())*time.Hour+time.Duration(t.Minute())*time.Minute
		if c.SlackBotToken == "" && c.SlackWebhookURL == "" {
			e.fail("RETRYAUDIT_DIGEST_AT", "the digest goes to Slack: set RETRYAUDIT_SLACK_BOT_TOKEN or RETRYAUDIT_SLACK_WEBHOOK_URL")
		}
	}
	s.DigestTZ = time.UTC
	if tz := e.str("RETRYAUDIT_DIGEST_TZ", ""); tz != "" {
		loc, err := time.LoadLocation(tz)
		if err != nil {
			e.fail("RETRYAUDIT_DIGEST_TZ", "%q is not an IANA time zone (such as Europe/Berlin)", tz)
		} else {
			s.DigestTZ = loc
		}
	}
	return s
}

// slackUsers reads RETRYAUDIT_SLACK_USERS: SlackUserID=name pairs, each
// name one of the pages' people (in RETRYAUDIT_UI_USERS; any name behind a
// proxy that signs people in).
func (e *envReader) slackUsers(c config) map[string]string {
	const name = "RETRYAUDIT_SLACK_USERS"
	v := e.str(name, "")
	if v == "" {
		return nil
	}
	users := map[string]string{}
	for _, pair := range strings.Split(v, ",") {
		id, person, ok := strings.Cut(strings.TrimSpace(pair), "=")
		id, person = strings.TrimSpace(id), strings.TrimSpace(person)
		switch {
		case !ok || person == "":
			e.fail(name, "each entry must be SlackUserID=name (such as U0123ABCD=alice)")
		case !slackUserID.MatchString(id):
			e.fail(name, "%q is not a Slack user id (such as U0123ABCD: the profile's ⋮ menu, Copy member ID)", id)
		case users[id] != "":
			e.fail(name, "%s is given twice", id)
		case c.UITrustHeader == "" && len(c.UIUsers) == 0 && person != "admin":
			e.fail(name, "%q is none of the pages' people: without RETRYAUDIT_UI_USERS the pages have one, admin", person)
		case c.UITrustHeader == "" && len(c.UIUsers) > 0 && c.UIUsers[person] == nil:
			e.fail(name, "%q is none of the pages' people: add it to RETRYAUDIT_UI_USERS", person)
		default:
			users[id] = person
		}
	}
	return users
}
