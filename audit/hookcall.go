package audit

import "time"

// HookCall is the last call an n8n instance's execution hooks made, kept so
// that retryaudit check can say whether hook reports arrive.
type HookCall struct {
	Instance string    `json:"instance"`
	At       time.Time `json:"at"`
	Reports  int       `json:"reports"`
	// The call's last report: what n8n was doing then.
	ExecutionID string `json:"execution_id"`
	Phase       string `json:"phase"`
	Status      string `json:"status,omitempty"`
}
