package main

import (
	"fmt"
	"log/slog"
	"net"
	"net/netip"
	"net/url"
	"os"
	"strconv"
	"strings"
	"time"

	"golang.org/x/crypto/bcrypt"

	"github.com/retryaudit/retryaudit/audit"
	"github.com/retryaudit/retryaudit/audit/store"
	"github.com/retryaudit/retryaudit/audit/store/postgres"
	"github.com/retryaudit/retryaudit/handlers"
	"github.com/retryaudit/retryaudit/people"
)

// config is the whole configuration, read from RETRYAUDIT_* variables once at
// start. Secrets may come from a file named by the variable with _FILE.
type config struct {
	Addr             string
	BaseURL          string
	DatabaseURL      string
	DataDir          string
	Token            string
	HookToken        string // n8n's execution hooks' token (RETRYAUDIT_HOOK_TOKEN)
	MaxBody          int64
	ReviewAfter      time.Duration
	AlertRepeat      time.Duration
	Retention        time.Duration
	PayloadRetention time.Duration
	MetricsAddr      string
	LogLevel         slog.Level

	N8NEditorURL string
	N8NAPIURL    string
	N8NAPIKey    string
	// Instances are the n8n instances besides the default one
	// (RETRYAUDIT_N8N_INSTANCES).
	Instances []n8nInstance
	N8NPoll   time.Duration
	// N8NReconcileGrace is how long after a failure reconciliation waits for
	// the error workflow's report before recording the failure itself.
	N8NReconcileGrace time.Duration
	// N8NReconcileLookback bounds how long an execution may run and still
	// be found by reconciliation when it fails.
	N8NReconcileLookback time.Duration

	SlackBotToken   string
	SlackChannel    string
	SlackWebhookURL string
	SlackAPIURL     string
	CRMLinks        map[string]string
	// CRMLookups are the sources' CRM lookups (RETRYAUDIT_CRM_LOOKUP).
	CRMLookups []people.LookupConfig

	UIUsers          map[string][]byte // name → bcrypt hash
	UITrustHeader    string
	UITrustedProxies []netip.Prefix

	MaxErrorBody  int64
	BodyBudget    int64
	WriteProbe    time.Duration // how often /readyz's write probe writes
	MaxConns      int           // connections open at once (RETRYAUDIT_MAX_CONNS)
	MaxIdleConns  int           // idle keep-alive connections (RETRYAUDIT_MAX_IDLE_CONNS)
	DBMaxConns    int
	DBLockTimeout time.Duration
	APITimeout    time.Duration // the longest a /v1 request may take
	QueueSize     int           // claims that may wait for a batch
	QueueWait     time.Duration // the longest a claim waits to start
	MaxBatch      int
	// RetryRate and RetryInFlight bound bulk retries: retries started a
	// minute, and retries waiting for n8n at once.
	RetryRate        int
	RetryInFlight    int
	SQLiteSyncNormal bool
	MetricsInterval  time.Duration
	// N8NMaxRun is the longest an n8n execution runs: an execution id unseen
	// for longer names a new execution (n8n's ids start again after a
	// restore).
	N8NMaxRun time.Duration
	// AllowNoWorkflowID takes claims and outcomes without workflow_id.
	AllowNoWorkflowID bool

	slackSettings
}

// minRetention is the shortest RETRYAUDIT_RETENTION allowed: senders
// redeliver for days, and a key forgotten too early lets a late redelivery
// through as a new event.
const minRetention = 72 * time.Hour

// envReader reads variables and collects every problem, so that one start
// names all of them.
type envReader struct {
	getenv func(string) string
	errs   []string
}

func (e *envReader) fail(name, format string, args ...any) {
	e.errs = append(e.errs, name+": "+fmt.Sprintf(format, args...))
}

func (e *envReader) str(name, def string) string {
	if v := strings.TrimSpace(e.getenv(name)); v != "" {
		return v
	}
	return def
}

// secret reads NAME, or the file NAME_FILE names (trailing newline trimmed).
// An empty file is refused: a secret expected from a file and not written
// there yet (a container's secret, an API key still to create) must not
// read as "unset" and start without it, or with a generated one.
func (e *envReader) secret(name string) string {
	v, file := e.getenv(name), e.getenv(name+"_FILE")
	switch {
	case v != "" && file != "":
		e.fail(name, "set either %s or %s_FILE, not both", name, name)
	case file != "":
		b, err := os.ReadFile(file)
		if err != nil {
			e.fail(name+"_FILE", "cannot read %s: %v", file, err)
			return ""
		}
		v := strings.TrimRight(string(b), "\r\n")
		if strings.TrimSpace(v) == "" {
			e.fail(name+"_FILE", "%s is empty: write the secret there, or unset %s_FILE", file, name)
		}
		return v
	}
	return strings.TrimSpace(v)
}

func (e *envReader) duration(name string, def time.Duration) time.Duration {
	v := e.str(name, "")
	if v == "" {
		return def
	}
	d, err := parseDuration(v)
	if err != nil || d <= 0 {
		e.fail(name, "%q is not a positive duration (examples: 90s, 15m, 12h, 30d)", v)
		return def
	}
	return d
}

// parseDuration accepts Go durations and whole days ("30d").
func parseDuration(v string) (time.Duration, error) {
	if days, ok := strings.CutSuffix(v, "d"); ok {
		n, err := strconv.Atoi(days)
		if err != nil {
			return 0, err
		}
		return time.Duration(n) * 24 * time.Hour, nil
	}
	return time.ParseDuration(v)
}

func (e *envReader) httpURL(name, v string) string {
	if v == "" {
		return ""
	}
	u, err := url.Parse(v)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		e.fail(name, "%q is not an http(s) URL", v)
		return ""
	}
	return strings.TrimRight(v, "/")
}

func loadConfig(getenv func(string) string) (config, error) {
	e := &envReader{getenv: getenv}
	c := config{
		Addr:                 e.str("RETRYAUDIT_ADDR", "127.0.0.1:8080"),
		DatabaseURL:          e.secret("RETRYAUDIT_DATABASE_URL"),
		DataDir:              e.str("RETRYAUDIT_DATA_DIR", "./data"),
		Token:                e.token("RETRYAUDIT_TOKEN"),
		HookToken:            e.token("RETRYAUDIT_HOOK_TOKEN"),
		ReviewAfter:          e.duration("RETRYAUDIT_REVIEW_AFTER", 15*time.Minute),
		AlertRepeat:          e.duration("RETRYAUDIT_ALERT_REPEAT", store.DefaultAlertRepeat),
		Retention:            e.duration("RETRYAUDIT_RETENTION", 30*24*time.Hour),
		PayloadRetention:     e.duration("RETRYAUDIT_PAYLOAD_RETENTION", 14*24*time.Hour),
		MetricsAddr:          e.str("RETRYAUDIT_METRICS_ADDR", ""),
		N8NAPIKey:            e.secret("RETRYAUDIT_N8N_API_KEY"),
		N8NPoll:              e.duration("RETRYAUDIT_N8N_POLL", time.Minute),
		N8NReconcileGrace:    e.duration("RETRYAUDIT_N8N_RECONCILE_GRACE", time.Minute),
		N8NReconcileLookback: e.duration("RETRYAUDIT_N8N_RECONCILE_LOOKBACK", 24*time.Hour),
		SlackBotToken:        e.secret("RETRYAUDIT_SLACK_BOT_TOKEN"),
		SlackChannel:         e.str("RETRYAUDIT_SLACK_CHANNEL", ""),
		SlackWebhookURL:      e.secret("RETRYAUDIT_SLACK_WEBHOOK_URL"),
		UITrustHeader:        e.str("RETRYAUDIT_UI_TRUST_HEADER", ""),
	}
	if _, _, err := net.SplitHostPort(c.Addr); err != nil {
		e.fail("RETRYAUDIT_ADDR", "%q is not host:port", c.Addr)
	}
	if strings.HasPrefix(c.DatabaseURL, "postgres") { // the URL holds a password: only the parser's words
		if _, _, _, err := postgres.DataSource(c.DatabaseURL); err != nil {
			e.fail("RETRYAUDIT_DATABASE_URL", "%s", strings.TrimPrefix(err.Error(), "audit: database URL "))
		}
	}
	if c.MetricsAddr != "" {
		if _, _, err := net.SplitHostPort(c.MetricsAddr); err != nil {
			e.fail("RETRYAUDIT_METRICS_ADDR", "%q is not host:port", c.MetricsAddr)
		}
	}
	c.BaseURL = e.httpURL("RETRYAUDIT_BASE_URL", e.str("RETRYAUDIT_BASE_URL", "")) // default: the listener
	c.N8NEditorURL = e.httpURL("RETRYAUDIT_N8N_EDITOR_URL", e.str("RETRYAUDIT_N8N_EDITOR_URL", ""))
	c.N8NAPIURL = e.httpURL("RETRYAUDIT_N8N_API_URL", e.str("RETRYAUDIT_N8N_API_URL", ""))
	c.SlackAPIURL = e.httpURL("RETRYAUDIT_SLACK_API_URL", e.str("RETRYAUDIT_SLACK_API_URL", ""))
	c.MaxBody = e.size("RETRYAUDIT_MAX_BODY", 1<<20)
	c.MaxErrorBody = e.size("RETRYAUDIT_MAX_ERROR_BODY", max(8<<20, c.MaxBody))
	c.BodyBudget = e.size("RETRYAUDIT_BODY_BUDGET", max(64<<20, c.MaxErrorBody))
	if c.MaxErrorBody < c.MaxBody {
		e.fail("RETRYAUDIT_MAX_ERROR_BODY", "is smaller than RETRYAUDIT_MAX_BODY (%d bytes)", c.MaxBody)
	}
	if c.BodyBudget < c.MaxErrorBody {
		e.fail("RETRYAUDIT_BODY_BUDGET", "is smaller than RETRYAUDIT_MAX_ERROR_BODY (%d bytes): the largest body could never be read", c.MaxErrorBody)
	}
	c.DBMaxConns = e.integer("RETRYAUDIT_DB_MAX_CONNS", 20, 2, 1000)
	c.MaxConns = e.integer("RETRYAUDIT_MAX_CONNS", 2048, 16, 1<<20)
	c.MaxIdleConns = e.integer("RETRYAUDIT_MAX_IDLE_CONNS", min(256, c.MaxConns), 1, 1<<20)
	if c.MaxIdleConns > c.MaxConns {
		e.fail("RETRYAUDIT_MAX_IDLE_CONNS", "is over RETRYAUDIT_MAX_CONNS (%d): idle connections are open ones", c.MaxConns)
	}
	c.DBLockTimeout = e.duration("RETRYAUDIT_DB_LOCK_TIMEOUT", store.DefaultLockTimeout)
	c.APITimeout = e.duration("RETRYAUDIT_API_TIMEOUT", 15*time.Second)
	c.MetricsInterval = e.duration("RETRYAUDIT_METRICS_INTERVAL", 15*time.Second)
	c.WriteProbe = e.duration("RETRYAUDIT_WRITE_PROBE", 5*time.Second)
	c.QueueSize = e.integer("RETRYAUDIT_QUEUE_SIZE", 4096, 1, 1<<20)
	c.QueueWait = e.duration("RETRYAUDIT_QUEUE_WAIT", store.DefaultQueueWait)
	c.MaxBatch = e.integer("RETRYAUDIT_MAX_BATCH", 128, 1, 1000)
	c.RetryRate = e.integer("RETRYAUDIT_RETRY_RATE", 30, 1, 600)
	c.RetryInFlight = e.integer("RETRYAUDIT_RETRY_IN_FLIGHT", 2, 1, 20)
	c.N8NMaxRun = e.duration("RETRYAUDIT_N8N_MAX_RUN", store.DefaultMaxRun)
	c.AllowNoWorkflowID = e.boolean("RETRYAUDIT_ALLOW_NO_WORKFLOW_ID")
	switch v := strings.ToLower(e.str("RETRYAUDIT_SQLITE_SYNC", "full")); v {
	case "full":
	case "normal":
		c.SQLiteSyncNormal = true
	default:
		e.fail("RETRYAUDIT_SQLITE_SYNC", "must be full or normal, not %q", v)
	}
	if v := e.str("RETRYAUDIT_UI_TRUSTED_PROXIES", ""); v != "" {
		proxies, err := handlers.ParseProxies(v)
		if err != nil {
			e.fail("RETRYAUDIT_UI_TRUSTED_PROXIES", "%v", err)
		}
		c.UITrustedProxies = proxies
	}
	if c.UITrustHeader != "" && len(c.UITrustedProxies) == 0 {
		e.fail("RETRYAUDIT_UI_TRUST_HEADER", "requires RETRYAUDIT_UI_TRUSTED_PROXIES (the proxy's addresses or "+
			"CIDR prefixes, e.g. 127.0.0.1): anyone else could send the header and be signed in")
	}
	c.LogLevel = e.logLevel("RETRYAUDIT_LOG_LEVEL")
	if c.Retention < minRetention {
		e.fail("RETRYAUDIT_RETENTION", "%s is under 3 days: senders redeliver for days, and a key "+
			"forgotten too early lets a late redelivery through as a new event", c.Retention)
	}
	if c.AlertRepeat > 24*time.Hour {
		e.fail("RETRYAUDIT_ALERT_REPEAT", "%s is over 24h: a failure that keeps repeating should be heard of at least daily", c.AlertRepeat)
	}
	if (c.N8NAPIURL == "") != (c.N8NAPIKey == "") {
		e.fail("RETRYAUDIT_N8N_API_URL", "set both RETRYAUDIT_N8N_API_URL and RETRYAUDIT_N8N_API_KEY, or neither")
	}
	switch {
	case c.SlackBotToken != "" && c.SlackWebhookURL != "":
		e.fail("RETRYAUDIT_SLACK_BOT_TOKEN", "set either a bot token (with RETRYAUDIT_SLACK_CHANNEL) or RETRYAUDIT_SLACK_WEBHOOK_URL, not both")
	case c.SlackBotToken != "" && c.SlackChannel == "":
		e.fail("RETRYAUDIT_SLACK_CHANNEL", "required with RETRYAUDIT_SLACK_BOT_TOKEN (a channel id such as C0123456789)")
	case c.SlackWebhookURL != "":
		if u, err := url.Parse(c.SlackWebhookURL); err != nil || (u.Scheme != "https" && u.Scheme != "http") {
			e.fail("RETRYAUDIT_SLACK_WEBHOOK_URL", "is not an http(s) URL") // the value is a secret: not echoed
		}
	}
	var err error
	if c.CRMLinks, err = audit.ParseCRMLinks(e.str("RETRYAUDIT_CRM_LINKS", "")); err != nil {
		e.fail("RETRYAUDIT_CRM_LINKS", "%v", err)
	}
	c.CRMLookups = e.lookups()
	c.UIUsers = e.users("RETRYAUDIT_UI_USERS")
	c.Instances = e.instances(c.Token, c.HookToken)
	c.slackSettings = e.slackSettings(c)
	if len(e.errs) > 0 {
		return c, fmt.Errorf("configuration:\n  %s", strings.Join(e.errs, "\n  "))
	}
	return c, nil
}

// boolean reads true or false (1, 0, yes, no); unset is false.
func (e *envReader) boolean(name string) bool {
	switch v := strings.ToLower(e.str(name, "false")); v {
	case "true", "1", "yes":
		return true
	case "false", "0", "no":
		return false
	default:
		e.fail(name, "must be true or false, not %q", v)
		return false
	}
}

func (e *envReader) size(name string, def int64) int64 {
	v := e.str(name, "")
	if v == "" {
		return def
	}
	mult := int64(1)
	for _, u := range []struct {
		suffix string
		mult   int64
	}{{"KiB", 1 << 10}, {"MiB", 1 << 20}, {"GiB", 1 << 30}, {"KB", 1000}, {"MB", 1000 * 1000}} {
		if n, ok := strings.CutSuffix(v, u.suffix); ok {
			v, mult = strings.TrimSpace(n), u.mult
			break
		}
	}
	n, err := strconv.ParseInt(v, 10, 64)
	if err != nil || n <= 0 {
		e.fail(name, "%q is not a size (examples: 1048576, 512KiB, 1MiB)", e.getenv(name))
		return def
	}
	return n * mult
}

func (e *envReader) integer(name string, def, lo, hi int) int {
	v := e.str(name, "")
	if v == "" {
		return def
	}
	n, err := strconv.Atoi(v)
	if err != nil || n < lo || n > hi {
		e.fail(name, "%q is not a whole number from %d to %d", v, lo, hi)
		return def
	}
	return n
}

// connLimits are the caps of the main listener's connections.
func (c config) connLimits() connLimits {
	return connLimits{Open: c.MaxConns, Idle: c.MaxIdleConns}
}

// origin returns the scheme://host of a URL.
func origin(rawURL string) string {
	u, err := url.Parse(rawURL)
	if err != nil {
		return rawURL
	}
	return u.Scheme + "://" + u.Host
}

func (e *envReader) logLevel(name string) slog.Level {
	var l slog.Level
	if err := l.UnmarshalText([]byte(e.str(name, "info"))); err != nil {
		e.fail(name, "must be debug, info, warn or error")
	}
	return l
}

// minHashCost is the lowest bcrypt cost RETRYAUDIT_UI_USERS may hold.
const minHashCost = 10

// users reads name:bcrypt-hash pairs separated by commas.
func (e *envReader) users(name string) map[string][]byte {
	v := e.secret(name)
	if v == "" {
		return nil
	}
	users := map[string][]byte{}
	for _, pair := range strings.Split(v, ",") {
		user, hash, ok := strings.Cut(strings.TrimSpace(pair), ":")
		if !ok || user == "" {
			e.fail(name, "each entry must be name:bcrypt-hash")
			continue
		}
		cost, err := bcrypt.Cost([]byte(hash))
		if err != nil {
			e.fail(name, "the hash of %q is not a bcrypt hash (make one with: htpasswd -nbBC 10 %s PASSWORD)", user, user)
			continue
		}
		if cost < minHashCost {
			// A cheap hash is cracked fast if it leaks, and its refusals
			// would take less time than the others' (though the pages
			// even them out).
			e.fail(name, "the hash of %q has bcrypt cost %d, under %d (htpasswd -B makes cost 5 unless told): "+
				"make one with: htpasswd -nbBC 10 %s PASSWORD", user, cost, minHashCost, user)
			continue
		}
		users[user] = []byte(hash)
	}
	return users
}
