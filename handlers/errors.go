package handlers

import (
	"errors"
	"log/slog"
	"net/http"
	"strings"

	"github.com/gin-gonic/gin"

	"github.com/retryaudit/retryaudit/audit"
)

// apiErrorBody is the one shape of every /v1 error:
// {"error":{"code":"…","message":"…","fields":{…}}}.
type apiErrorBody struct {
	Error apiErrorDetail `json:"error"`
}

type apiErrorDetail struct {
	Code    string            `json:"code"`
	Message string            `json:"message"`
	Fields  map[string]string `json:"fields,omitempty"`
	Status  string            `json:"status,omitempty"` // an entry's current status, for conflicts
	Holder  string            `json:"holder,omitempty"` // the execution that holds it, for not_holder
	Reason  string            `json:"reason,omitempty"` // why a retry was not sent (retries.Refusal)
}

// status maps a domain error's code to an HTTP status and an error code.
// It is the only place that does.
func status(code audit.Code) (int, string) {
	switch code {
	case audit.CodeInvalid:
		return http.StatusUnprocessableEntity, "validation_failed"
	case audit.CodeNotFound:
		return http.StatusNotFound, "not_found"
	case audit.CodeConflict:
		return http.StatusConflict, "conflict"
	case audit.CodeNotHolder:
		return http.StatusConflict, "not_holder"
	case audit.CodeUnavailable:
		return http.StatusServiceUnavailable, "unavailable"
	case audit.CodeBusy:
		return http.StatusServiceUnavailable, "busy"
	case audit.CodeUnknown:
		return http.StatusServiceUnavailable, "unknown"
	}
	return http.StatusInternalServerError, "internal"
}

// fail answers a /v1 request with the error err names.
func (h *Handler) fail(c *gin.Context, err error) {
	var e *audit.Error
	errors.As(err, &e)
	code, name := status(audit.ErrorCode(err))
	d := apiErrorDetail{Code: name}
	switch {
	case name == "busy" && errors.Is(err, audit.ErrLocked):
		// Another session (n8n's Postgres node, a person's psql, another
		// instance's batch) holds the entry's row: this key waits, the
		// others do not.
		c.Header("Retry-After", "2")
		d.Message = "the entry's row is locked by another database session; nothing was recorded, try again"
		h.log.Warn("row locked", "route", c.FullPath(), "err", err)
	case name == "busy":
		// The database is up: the request waited for others (the queue,
		// their rows) past what it may wait.
		c.Header("Retry-After", "1")
		d.Message = "the service is busy: this request waited for other requests past its deadline " +
			"(the database is up); nothing was recorded, try again"
		h.log.Warn("busy", "route", c.FullPath(), "err", err)
	case name == "unknown":
		// The commit was sent, its answer lost: the claim may stand. The
		// same request again is answered as it was (the same execution).
		c.Header("Retry-After", "2")
		d.Message = "the database's answer to this request was lost: it may have been recorded; sending the same " +
			"request again is safe (the same execution is answered as it was)"
		h.log.Warn("commit answer lost", "route", c.FullPath(), "err", err)
	case code == http.StatusServiceUnavailable:
		c.Header("Retry-After", "5")
		d.Message = "the database is unavailable; nothing was recorded, try again"
		h.logDBFailure(c, slog.LevelWarn, "database unavailable", err)
	case code == http.StatusInternalServerError:
		d.Message = "internal error; nothing was recorded"
		h.logDBFailure(c, slog.LevelError, "internal error", err)
	default:
		d.Message, d.Fields, d.Status, d.Holder = e.Message, e.Fields, string(e.Status), e.Holder
	}
	c.AbortWithStatusJSON(code, apiErrorBody{Error: d})
}

// logDBFailure logs a request the database failed: the first of an
// outage at level, with the error, and the rest at debug until the write
// probe succeeds again (which logs the outage's end), so that an outage is
// a few lines, not one per request.
func (h *Handler) logDBFailure(c *gin.Context, level slog.Level, msg string, err error) {
	if h.dbFailed(err) {
		h.log.Log(c.Request.Context(), level, msg+" (further failures are logged at debug until a write succeeds)",
			"route", c.FullPath(), "err", err)
		return
	}
	h.log.Debug(msg, "route", c.FullPath(), "err", err)
}

func (h *Handler) apiError(c *gin.Context, code int, name, message string, fields map[string]string) {
	c.AbortWithStatusJSON(code, apiErrorBody{Error: apiErrorDetail{Code: name, Message: message, Fields: fields}})
}

// notFound answers an unknown route: JSON under /v1, a page elsewhere.
func (h *Handler) notFound(c *gin.Context) {
	if strings.HasPrefix(c.Request.URL.Path, "/v1/") {
		h.apiError(c, http.StatusNotFound, "not_found", "no such endpoint: "+c.Request.Method+" "+c.Request.URL.Path, nil)
		return
	}
	h.pageError(c, http.StatusNotFound, "Not found", "There is no page here.")
}
