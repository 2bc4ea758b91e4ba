package n8n

import (
	"cmp"
	"encoding/json"
	"strings"
	"time"

	"github.com/retryaudit/retryaudit/audit"
)

// execution is an execution as n8n's API returns it. Ids may be strings or
// numbers; retryOf is null, not absent, when there is none.
type execution struct {
	ID         flexID    `json:"id"`
	WorkflowID flexID    `json:"workflowId"`
	Mode       string    `json:"mode"`
	Status     string    `json:"status"`
	RetryOf    flexID    `json:"retryOf"`
	StartedAt  time.Time `json:"startedAt"`
	StoppedAt  time.Time `json:"stoppedAt"`
	Data       *struct {
		ResultData struct {
			LastNodeExecuted string `json:"lastNodeExecuted"`
			Error            *struct {
				Message     string `json:"message"`
				Description string `json:"description"`
				Node        *struct {
					Name string `json:"name"`
				} `json:"node"`
			} `json:"error"`
		} `json:"resultData"`
	} `json:"data"`
}

func (e execution) public() audit.N8NExecution {
	return audit.N8NExecution{ID: clip(string(e.ID)), WorkflowID: clip(string(e.WorkflowID)), Mode: clip(e.Mode),
		Status: clip(e.Status), RetryOf: clip(string(e.RetryOf)), StartedAt: e.StartedAt, StoppedAt: e.StoppedAt}
}

// maxField bounds each field of an execution kept from n8n's answers
// (n8n's ids are under 40 characters, its modes and statuses one word):
// the lookup cache and a reconciliation pass keep thousands of them.
const maxField = 128

// clip cuts s at maxField bytes, into a string of its own (a slice of a
// long string would keep all of it).
func clip(s string) string { return clipTo(s, maxField) }

func clipTo(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return strings.Clone(strings.ToValidUTF8(s[:n], ""))
}

// flexID reads a JSON string or number; null is "".
type flexID string

// UnmarshalJSON reads a string, a number or null.
func (f *flexID) UnmarshalJSON(b []byte) error {
	s := strings.TrimSpace(string(b))
	switch {
	case s == "null":
		*f = ""
	case strings.HasPrefix(s, `"`):
		var v string
		if err := json.Unmarshal(b, &v); err != nil {
			return err
		}
		*f = flexID(v)
	default:
		*f = flexID(s)
	}
	return nil
}

// Failed is a failed execution found by FailedExecutions, with what its
// stored data says about the error.
type Failed struct {
	audit.N8NExecution
	Node    string
	Message string
}

func failed(e execution) Failed {
	f := Failed{N8NExecution: e.public()}
	if e.Data != nil {
		f.Node = e.Data.ResultData.LastNodeExecuted
		if er := e.Data.ResultData.Error; er != nil {
			// As the intake does: n8n's HTTP node keeps what the server
			// said in the description.
			f.Message = cmp.Or(er.Message, er.Description)
			if er.Description != "" && er.Description != f.Message {
				f.Message += ": " + er.Description
			}
			if er.Node != nil && er.Node.Name != "" {
				f.Node = er.Node.Name
			}
		}
	}
	f.Node, f.Message = clip(f.Node), clipTo(f.Message, audit.MaxMessageLen)
	return f
}
