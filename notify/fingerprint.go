package notify

import (
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"

	"github.com/retryaudit/retryaudit/audit/store"
)

// ConfigFingerprint identifies a Slack configuration (token and channel, or
// webhook) without revealing it: an HMAC keyed with a secret kept in the
// database, so that the stored value cannot confirm a guessed token. It is
// "" when Slack is not configured.
func ConfigFingerprint(ctx context.Context, s *store.Store, n Notifier) (string, error) {
	var config string
	switch n := n.(type) {
	case nil:
		return "", nil
	case *Bot:
		config = "bot\x00" + n.token + "\x00" + n.channel
	case *Webhook:
		config = "webhook\x00" + n.url
	default:
		config = "other\x00" + n.Name()
	}
	key, err := s.Secret(ctx, "slack-fingerprint")
	if err != nil {
		return "", err
	}
	mac := hmac.New(sha256.New, key)
	mac.Write([]byte(config))
	return hex.EncodeToString(mac.Sum(nil)[:16]), nil
}
