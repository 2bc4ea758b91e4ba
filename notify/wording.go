package notify

import (
	"cmp"
	"fmt"
	"time"

	"github.com/retryaudit/retryaudit/audit"
)

// The wording of every Slack message is in this file: change a phrase here
// and rebuild. Functions return plain text unless their name says mrkdwn;
// whatever came from outside (ids, names, messages) is escaped by the caller
// of the mrkdwn ones or here, never trusted.

// headline is the header of a message: short, plain text.
func headline(a audit.Alert, m mode) string {
	if m == asUpdate && a.HasEvent() {
		switch a.Status {
		case audit.StatusDone:
			return "Resolved: done"
		case audit.StatusFailed:
			return "Resolved: failed, a retry is safe"
		case audit.StatusCancelled:
			return "Cancelled: no execution may act on it"
		}
		return "Still open: outcome unknown"
	}
	switch a.Kind {
	case audit.AlertExecutionError:
		return "n8n run failed: outcome unknown"
	case audit.AlertUnlinkedError:
		if m == asReply {
			return "Failed again"
		}
		return "n8n error linked to no event"
	case audit.AlertUnknown:
		return "Outcome unknown: check the CRM"
	case audit.AlertStale:
		return "Processing too long without an outcome"
	case audit.AlertFingerprint:
		return "One key, two different events?"
	case audit.AlertNotHolder:
		return "Refused report: did a second execution act?"
	case audit.AlertIDReset:
		return "n8n's execution ids started again"
	case audit.AlertContradiction:
		if a.Decision == string(audit.OutcomeFailed) {
			return "A report contradicts a resolution"
		}
		return "A report contradicts a resolution: the CRM may have the order"
	case kindTest:
		return "retryaudit test message"
	}
	title, _ := news(a)
	return "Update: " + title
}

// kindTest is the kind of slack-test's message.
const kindTest = "test"

// subject names what an alert is about, plain: "shop / order-1042", or the
// workflow and node of an error linked to no event.
func subject(a audit.Alert) string {
	switch {
	case a.HasEvent():
		s := a.Source + " / " + a.EventID
		if a.Item != "" {
			s += " / " + a.Item
		}
		return s
	case a.Group != "":
		s := cmp.Or(a.WorkflowName, a.WorkflowID, "a workflow")
		if a.Node != "" {
			s += " / " + a.Node
		}
		return s
	case a.ErrorID != 0:
		return fmt.Sprintf("error #%d", a.ErrorID)
	}
	return ""
}

// news says what a follow-up reports: a short plain title and a
// mrkdwn sentence.
func news(a audit.Alert) (string, string) {
	who := escape(a.ExecutionID)
	switch a.News {
	case audit.KindClaim:
		if a.Delivery == string(audit.DeliveryManualRetry) {
			return "manual retry", fmt.Sprintf("execution %s, a retry of %s, presented it: *%s*", who, escape(a.RetryOf), escape(a.Decision))
		}
		return "redelivery", fmt.Sprintf("execution %s presented it again: *%s*", who, escape(a.Decision))
	case audit.KindError:
		return "new error", fmt.Sprintf("execution %s failed in %s", who, escape(cmp.Or(a.Node, "an unnamed node")))
	case audit.KindOutcome:
		return "outcome " + a.Decision, fmt.Sprintf("reported *%s*", escape(cmp.Or(a.Message, a.Decision)))
	case audit.KindResolution:
		return "resolved " + a.Decision, fmt.Sprintf("*%s* by %s", escape(a.Decision), escape(a.Actor))
	case audit.KindStale:
		return "stale", "still processing without an outcome"
	case audit.KindFingerprint:
		return "fingerprint mismatch", "a delivery brought another fingerprint"
	}
	return a.News, escape(a.Message)
}

// groupCount says how often a group's error happened, plain:
// "failed 17 times since 09:00, last 09:52 (UTC)".
func groupCount(a audit.Alert) string {
	if a.Count <= 1 {
		return "failed once, at " + clock(a.LastAt, a.LastAt) + " (UTC)"
	}
	return fmt.Sprintf("failed %d times since %s, last %s (UTC)", a.Count, clock(a.FirstAt, a.LastAt),
		clock(a.LastAt, a.FirstAt))
}

// clock writes a time of day in UTC, with the date when ref is another day.
func clock(t, ref time.Time) string {
	t, ref = t.UTC(), ref.UTC()
	if t.YearDay() != ref.YearDay() || t.Year() != ref.Year() {
		return t.Format("Jan 2 15:04")
	}
	return t.Format("15:04")
}

// stamp is when an alert was written, for the message's footer.
func stamp(t time.Time) string { return t.UTC().Format("2006-01-02 15:04:05 UTC") + " · retryaudit" }

// payloadLinkMrkdwn shows the link n8n put in an error payload when no
// editor URL is configured: as text that names its host, never as a button
// that looks like ours (a payload can say anything).
func payloadLinkMrkdwn(host, url string) string {
	return fmt.Sprintf("Link in n8n's payload, not checked (host *%s*): `%s`", escape(host), escape(url))
}

// Where a link left out of a message can be found instead.
const (
	whereEvent    = "search the event's id in the events list"
	whereAuditRow = "the audit row's page links it"
)

// linkTooLongMrkdwn says that a button was left out because its address is
// longer than Slack allows, and where to find the link instead.
func linkTooLongMrkdwn(label, where string) string {
	return cut + " *" + label + "*: no button, its address is longer than the 3,000 characters Slack allows; " + where + "."
}

// The labels of the fields and buttons.
const (
	labelSource     = "Source"
	labelEventID    = "Event ID"
	labelItem       = "Item"
	labelStatus     = "Status"
	labelKind       = "Kind"
	labelWorkflow   = "Workflow"
	labelNode       = "Failed node"
	labelExecution  = "Execution"
	labelRetryOf    = "Retry of"
	labelDeliveries = "Deliveries"
	labelProcessing = "Processing for"
	labelFailures   = "Failures"
	labelLastExec   = "Last execution"

	buttonAudit = "Audit row"
	buttonN8N   = "n8n execution"
	buttonCRM   = "CRM order"

	buttonLookup = "Look up in CRM"
	buttonDone   = "Mark done"
	buttonFailed = "Mark failed"
	buttonRetry  = "Retry in n8n"
)

// fallbackMrkdwn is the minimal message sent when Slack refused the full one
// (invalid_blocks, msg_too_long): what it is about and where to read it.
func fallbackMrkdwn(a audit.Alert, auditURL string) string {
	s := "retryaudit alert (Slack refused the full message): " + escape(fit(subject(a), 500))
	if auditURL != "" {
		s += " <" + linkURL(auditURL) + "|" + buttonAudit + ">"
	}
	return s
}
